package selfmod_test

import (
	"context"
	"os"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// An add_mcp_server approval binds to the whole server the approver saw,
// env included: the env is stored and applied with the server, so a replay
// carrying another env (NODE_OPTIONS=--require ...) is a different server.
func TestMCPGrantBindsTheApprovedEnv(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('g1', 'g1')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'g1', 'r1')`,
		`INSERT INTO holds (id, kind, payload, session_id, agent_group_id, status, resolved_at)
			VALUES ('h1', 'add_mcp_server',
			        '{"name":"docs","command":"npx","args":["docs-mcp"],"env":{"LOG":"info"}}'::jsonb,
			        's1', 'g1', 'approved', now())`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	guard := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1")).Guard
	replay := func(env map[string]any) *guardv1.DecideResponse {
		t.Helper()
		p, err := structpb.NewStruct(map[string]any{"name": "docs", "command": "npx", "args": []any{"docs-mcp"}, "env": env})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := guard.Decide(ctx, &guardv1.DecideRequest{Action: "self_mod.add_mcp_server", Payload: p, Grant: "h1"})
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return resp
	}

	if d := replay(map[string]any{"LOG": "info", "NODE_OPTIONS": "--require /workspace/evil.js"}).GetDecision(); d.GetEffect() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("replay with another env: %v, want DENY (invalid or mismatched grant)", d)
	}
	var consumed bool
	if err := srv.Pool.QueryRow(ctx, `SELECT consumed_at IS NOT NULL FROM holds WHERE id = 'h1'`).Scan(&consumed); err != nil || consumed {
		t.Fatalf("grant consumed by the mismatched replay (consumed=%v, err=%v)", consumed, err)
	}
	if d := replay(map[string]any{"LOG": "info"}).GetDecision(); d.GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay of the approved server: %v, want ALLOW", d)
	}
}
