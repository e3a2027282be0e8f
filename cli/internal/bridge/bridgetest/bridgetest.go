// Package bridgetest is the world every chat bridge's end-to-end tests run
// in: the real clawguard-server on a fresh database (clitest), an operator
// connection, a bridge token bound to the bridge's namespace, a live
// runner, and the fixtures and probes the scenarios share (users with a
// DM, an a2a hold for one approver, holds, pushes, the bridge binary).
// Each bridge's tests add their fake chat platform.
package bridgetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/cli/internal/clitest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Wait is how long a scenario waits for what the bridge should do.
const Wait = 15 * time.Second

// World is one test's control plane, seen from a bridge of namespace NS.
type World struct {
	T           *testing.T
	NS          string
	Srv         *clitest.Server
	DB          *pgxpool.Pool
	Op          *grpc.ClientConn
	BridgeToken string // a bridge token for NS alone

	stop func() // the running bridge's graceful stop
}

// New starts the world: the server, a bridge token for ns and a live
// runner r1 (so sessions opened for routed messages are placed).
func New(t *testing.T, ns string) *World {
	t.Helper()
	srv := clitest.Start(t)
	w := &World{T: t, NS: ns, Srv: srv, DB: srv.DB(t), Op: srv.Operator(t)}
	w.BridgeToken = srv.Token(t, &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_BRIDGE, Name: ns, Channels: []string{ns}})
	w.Exec(`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h1', now() + interval '1 hour')`)
	t.Cleanup(w.StopBridge) // before the server stops (cleanups run last first)
	return w
}

// Bridge is a bridge under test.
type Bridge interface {
	Run(ctx context.Context) error
	HTTPAddr(ctx context.Context) (string, error)
}

// Log is a logger for the bridge under test, writing next to the server's
// log (shown when a test fails).
func (w *World) Log() *slog.Logger {
	return slog.New(slog.NewJSONHandler(w.Srv.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// StartBridge runs b in process until StopBridge, waits until it listens
// and notReady says "", and returns its HTTP address. conn (its
// connection to the server) is closed when it stops.
func (w *World) StartBridge(b Bridge, conn io.Closer, notReady func() string) string {
	w.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	w.stop = func() {
		cancel()
		if err := <-done; err != nil {
			w.T.Errorf("bridge Run: %v", err)
		}
		conn.Close()
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	addr, err := b.HTTPAddr(hctx)
	if err != nil {
		w.T.Fatalf("bridge never listened: %v", err)
	}
	w.Eventually(10*time.Second, "bridge ready", func() bool { return notReady() == "" })
	return addr
}

// StopBridge stops the running bridge gracefully (Run must return nil).
func (w *World) StopBridge() {
	if w.stop != nil {
		stop := w.stop
		w.stop = nil
		stop()
	}
}

// Exec runs a statement or fails the test.
func (w *World) Exec(sql string, args ...any) {
	w.T.Helper()
	if _, err := w.DB.Exec(context.Background(), sql, args...); err != nil {
		w.T.Fatalf("%s: %v", sql, err)
	}
}

// Str reads one text value or fails the test.
func (w *World) Str(sql string, args ...any) string {
	w.T.Helper()
	var s string
	if err := w.DB.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		w.T.Fatalf("%s: %v", sql, err)
	}
	return s
}

// User makes the user <NS>:<handle>, whose DM is addressed by the same
// handle, with an optional role (group "" = global), and returns its id.
func (w *World) User(handle, role, group string) string {
	w.T.Helper()
	uid := w.NS + ":" + handle
	w.Exec(`INSERT INTO users (id) VALUES ($1) ON CONFLICT DO NOTHING`, uid)
	w.Exec(`INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, uid, w.NS, handle)
	if role != "" {
		w.Exec(`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ($1, $2, NULLIF($3, ''))`, uid, role, group)
	}
	return uid
}

// Pushes are the push bodies of a kind stored for a group's sessions.
func (w *World) Pushes(groupID, kind string) []*guardv1.Push {
	w.T.Helper()
	rows, err := w.DB.Query(context.Background(), `SELECT p.body FROM runner_pushes p JOIN sessions s ON s.id = p.session_id
		WHERE s.agent_group_id = $1 AND p.kind = $2 ORDER BY p.created_at`, groupID, kind)
	if err != nil {
		w.T.Fatal(err)
	}
	defer rows.Close()
	var out []*guardv1.Push
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			w.T.Fatal(err)
		}
		p := &guardv1.Push{}
		if err := proto.Unmarshal(body, p); err != nil {
			w.T.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// AsAgent is the runner r1 speaking for one of its sessions.
func (w *World) AsAgent(session string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-clawguard-session", session)
}

// RunnerConn is a connection with a runner token of r1.
func (w *World) RunnerConn() *grpc.ClientConn {
	w.T.Helper()
	tok, err := guardv1.NewRegistryClient(w.Op).CreateToken(context.Background(), &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: "r1", RunnerId: "r1"})
	if err != nil {
		w.T.Fatal(err)
	}
	return w.Srv.Dial(w.T, tok.GetSecret())
}

// Eventually polls cond until it holds or the deadline passes.
func (w *World) Eventually(d time.Duration, what string, cond func() bool) {
	w.T.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			w.T.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// HoldOf waits for the newest hold of a kind and returns its id.
func (w *World) HoldOf(kind string) string {
	w.T.Helper()
	var id string
	w.Eventually(Wait, "a "+kind+" hold", func() bool {
		err := w.DB.QueryRow(context.Background(), `SELECT id FROM holds WHERE kind = $1 ORDER BY created_at DESC LIMIT 1`, kind).Scan(&id)
		return err == nil
	})
	return id
}

// HoldStatus is a hold's status word.
func (w *World) HoldStatus(id string) string {
	return w.Str(`SELECT status FROM holds WHERE id = $1`, id)
}

// RequestFor files a sessionless hold only user may resolve (a credential
// gateway's kind) and returns its id.
func (w *World) RequestFor(user, title string) string {
	w.T.Helper()
	resp, err := guardv1.NewApprovalsClient(w.Op).Request(context.Background(), &guardv1.RequestRequest{
		Kind: "onecli_credential", Card: &guardv1.HoldCard{Title: title},
		ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: user}}},
	})
	if err != nil {
		w.T.Fatalf("Approvals.Request: %v", err)
	}
	return resp.GetHold().GetId()
}

// A2A sets up research asking to message ops, held for the user of
// approver alone (a message policy), with research's session s_research
// on r1; it returns the approver's user id.
func (w *World) A2A(approver string) string {
	w.T.Helper()
	w.Exec(`INSERT INTO agent_groups (id, name) VALUES ('ag_research', 'research'), ('ag_ops', 'ops')`)
	uid := w.User(approver, "", "")
	w.Exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('ag_research', 'ops', 'ag_ops')`)
	w.Exec(`INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('ag_research', 'ag_ops', $1)`, uid)
	w.Exec(`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s_research', 'ag_research', 'r1')`)
	return uid
}

// A2AHold is research asking to send ops text: a hold (A2A's policy).
func (w *World) A2AHold(text string) string {
	w.T.Helper()
	resp, err := guardv1.NewGuardClient(w.RunnerConn()).Decide(w.AsAgent("s_research"), &guardv1.DecideRequest{
		Action:   "a2a.send",
		Resource: map[string]string{"to": "ag_ops"},
		Payload:  Struct(w.T, map[string]any{"to": "ag_ops", "text": text}),
		Card:     &guardv1.HoldCard{Title: "Message to ops", Question: "research wants to send ops: " + text, DeliveryAction: "send_message"},
	})
	if err != nil {
		w.T.Fatalf("Decide a2a.send: %v", err)
	}
	if resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD || resp.GetHoldId() == "" {
		w.T.Fatalf("a2a.send answered %v, want a hold", resp.GetDecision())
	}
	return resp.GetHoldId()
}

// Struct is m as a Struct or fails the test.
func Struct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// HTTPGet is the status and body of a GET.
func HTTPGet(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// BuildBridge builds a bridge command of the cli module into the test's
// temp dir, as make build does (-X main.version), and checks that
// --version prints that version.
func BuildBridge(t testing.TB, pkg string) string {
	t.Helper()
	const version = "v9.9.9-test"
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+version, "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || strings.TrimSpace(string(out)) != version {
		t.Fatalf("%s --version: %q %v, want %s", pkg, out, err, version)
	}
	return bin
}

// Run starts a bridge binary with env added to the test's, waits for its
// start log line, and returns the stop: SIGTERM, a clean exit 0 within
// 20 s, and the logs, which must be JSON records with a level and a msg
// and hold none of the secrets.
func (w *World) Run(bin string, env []string, started string, secrets ...string) (stop func() string) {
	t := w.T
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	stderr := &clitest.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Eventually(Wait, "the bridge started", func() bool { return strings.Contains(stderr.String(), started) })
	return func() string {
		t.Helper()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s after SIGTERM: %v\n%s", bin, err, stderr.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%s did not stop on SIGTERM\n%s", bin, stderr.String())
		}
		logs := stderr.String()
		sc := bufio.NewScanner(strings.NewReader(logs))
		lines := 0
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("a log line is not JSON: %q", sc.Text())
			}
			if rec["level"] == nil || rec["msg"] == nil {
				t.Fatalf("a log record lacks level or msg: %v", rec)
			}
			lines++
		}
		if lines == 0 {
			t.Fatalf("%s logged nothing", bin)
		}
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Fatalf("a secret in the logs of %s", bin)
			}
		}
		return logs
	}
}

// Sent is what a fake chat recorded: a message's text and whether it has
// buttons (a card).
type Sent interface {
	Body() string
	HasButtons() bool
}

// Card waits for the messages among sent() that are cards about holdID
// and returns the one (two are a card sent twice: the test fails).
func Card[M Sent](w *World, holdID string, sent func() []M) M {
	w.T.Helper()
	var found []M
	w.Eventually(Wait, "card for "+holdID, func() bool {
		found = found[:0]
		for _, m := range sent() {
			if m.HasButtons() && strings.Contains(m.Body(), holdID) {
				found = append(found, m)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		w.T.Fatalf("%d cards for %s, want exactly 1", len(found), holdID)
	}
	return found[0]
}

// Containing waits for a message among sent() whose text contains want
// and returns it (the first).
func Containing[M Sent](w *World, what, want string, sent func() []M) M {
	w.T.Helper()
	var got M
	w.Eventually(Wait, fmt.Sprintf("%s containing %q", what, want), func() bool {
		for _, m := range sent() {
			if strings.Contains(m.Body(), want) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}
