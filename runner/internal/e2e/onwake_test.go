package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// The seed's on_wake: after an approved self-modification restarts the
// container, the fresh agent is told what changed and what to tell the user
// (verify and report; or, for packages an image without a package manager
// only recorded, that they are not available). The
// message must reach the agent that runs after the restart, and the group's
// restart push must not restart it a second time (which would take the
// message away from the agent that read it).
func TestApprovedSelfModificationWakesTheFreshAgentToVerify(t *testing.T) {
	for _, tc := range []struct {
		name, action string
		payload      map[string]any
		mention, ask string
	}{
		// The process runtime has no package manager: the packages are
		// recorded, not installed, and the agent is told so (debian_test.go
		// sees the verify-and-report words on an image that installs them).
		{"install_packages", "install_packages", map[string]any{"apt": []any{"cowsay"}, "npm": []any{"left-pad"}}, "apt: cowsay, npm: left-pad",
			"recorded, not installed: your base image has no package manager. Tell the user they are not available"},
		{"add_mcp_server", "add_mcp_server", map[string]any{"name": "fs", "command": "mcp-fs", "args": []any{"/workspace"}}, `MCP server "fs"`,
			"report the result to the user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			owner := s.owner(t, "telegram:olivia")
			g := s.group(t, "selfmod", guardv1.CliScope_CLI_SCOPE_GROUP)
			r := s.startRunner(t, runnerOpts{groups: []string{g}, script: []any{step(tc.action, tc.payload)}})
			sg := r.session(t, g)
			held := waitEvent(t, sg, tc.action+" held", notice("HELD"))
			if !noEvent(sg, isOnWake) {
				t.Fatal("verify-and-report message before approval")
			}
			s.approve(t, held.s("hold_id"), owner)

			wake := waitEvent(t, sg, "the verify-and-report message", isOnWake)
			if !strings.Contains(wake.s("text"), tc.mention) || !strings.Contains(wake.s("text"), tc.ask) {
				t.Fatalf("on_wake text = %q, want it to name %q and say %q", wake.s("text"), tc.mention, tc.ask)
			}
			waitEvent(t, sg, "RESULT notice", notice("RESULT"))
			// Once the group's restart push is applied (acknowledged and gone),
			// the agent was started exactly twice: at open and by the replay.
			waitPushesDrained(t, s, sg)
			if n := testutil.ToFloat64(r.Metrics.ContainerSpawnsTotal.WithLabelValues("ok")); n != 2 {
				t.Fatalf("agent spawns = %v, want 2 (open, and one restart for the approved change)", n)
			}
			// The agent that read the message is the one running now.
			evs := events(sg.Dir)
			lastStart, wakeAt := -1, -1
			for i, e := range evs {
				if e.s("type") == "start" {
					lastStart = i
				}
				if isOnWake(e) {
					wakeAt = i
				}
			}
			if lastStart > wakeAt {
				dumpEvents(t, sg)
				t.Fatal("the agent was restarted again after it read the verify-and-report message")
			}
		})
	}
}

// isOnWake: the system's message to the agent after an approved change
// restarted it (every one names the approval and says what to tell the user).
func isOnWake(e event) bool {
	return e.s("type") == "message" && e.s("sender") == sessions.SystemSender && strings.Contains(e.s("text"), "approved") &&
		strings.Contains(e.s("text"), "the user")
}

// waitPushesDrained waits until every push to the session is acknowledged.
func waitPushesDrained(t *testing.T, s *server, sess *sessions.Session) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	waitFor(t, 30*time.Second, "the session's pushes applied", func() bool {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM runner_pushes WHERE session_id = $1 AND acked_at IS NULL`, sess.ID).Scan(&n)
		return err == nil && n == 0
	})
}
