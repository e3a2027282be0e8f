package guardtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

var ctx = context.Background()

func agentCreate(w *world, card *guardv1.HoldCard) *guardv1.DecideRequest {
	return &guardv1.DecideRequest{Action: "agents.create", Actor: w.actor("agent:{A}:{SA}"),
		Payload: w.payload(map[string]any{"name": "Scout"}), Card: card}
}

// withOwner gives the world an eligible approver with a DM.
func withOwner(w *world) string {
	u := w.sub("telegram:{A}-owner")
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-owner');
		INSERT INTO user_roles (user_id, role) VALUES ('telegram:{A}-owner', 'owner');
		INSERT INTO user_dms (user_id, channel_type, address) VALUES ('telegram:{A}-owner', 'telegram', '{A}-dm')`)
	return u
}

func TestDryRunHasNoSideEffects(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := newWorld(t, srv)
	withOwner(w)
	req := agentCreate(w, &guardv1.HoldCard{Title: "x"})
	req.DryRun = true
	resp, err := op.Guard.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDecision().GetEffect() != hold || resp.GetHoldId() != "" {
		t.Fatalf("dry run: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds`); n != 0 {
		t.Fatalf("dry run created %d holds", n)
	}
	// A grant on a dry run answers as the replay would, without consuming it.
	w.exec(approvedHold("{A}-d1", "create_agent", "approved", `{"name":"Scout"}`, false))
	req = agentCreate(w, nil)
	req.Grant, req.DryRun = w.sub("{A}-d1"), true
	resp, err = op.Guard.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDecision().GetEffect() != allow {
		t.Fatalf("dry-run replay: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '{A}-d1' AND consumed_at IS NULL`); n != 1 {
		t.Fatal("dry run consumed the grant")
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE session_id = '{SA}' AND dry_run`); n != 2 {
		t.Fatalf("%d dry-run decisions logged, want 2", n)
	}
}

func TestActorRules(t *testing.T) {
	// The server's log is shown if this fails: one clean-clone CI run had
	// "another runner's session" answered OK instead of PermissionDenied,
	// which an unreadable facts statement (a fail-closed DENY) would do.
	var logs lockedBuffer
	srv := testserver.StartLogged(t, &logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	w := newWorld(t, srv)
	w.exec(`INSERT INTO runners (id) VALUES ('{R}-other');
		INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('{SA}-elsewhere', '{A}', '{R}-other')`)
	runnerTok := srv.Token(t, "runner", w.R, "")
	runner := testserver.ClientsFor(srv.Conn(t, runnerTok, ""))
	asAgent := testserver.ClientsFor(srv.Conn(t, runnerTok, w.SA))
	bridge := testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), ""))

	decide := func(c testserver.Clients, actor string) (*guardv1.DecideResponse, error) {
		req := &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": w.A}}
		if actor != "" {
			req.Actor = w.actor(actor)
		}
		return c.Guard.Decide(ctx, req)
	}
	cases := []struct {
		name   string
		c      testserver.Clients
		actor  string
		code   codes.Code
		effect guardv1.Effect
	}{
		{"runner for an agent on its own session", runner, "agent:{A}:{SA}", codes.OK, allow},
		{"runner for another runner's session", runner, "agent:{A}:{SA}-elsewhere", codes.PermissionDenied, 0},
		{"runner naming the wrong group for its session", runner, "agent:{B}:{SA}", codes.PermissionDenied, 0},
		{"runner for an agent without a session", runner, "agent:{A}", codes.PermissionDenied, 0},
		{"runner claiming to be the host", runner, "host", codes.PermissionDenied, 0},
		{"runner with the session header, actor omitted", asAgent, "", codes.OK, allow},
		{"runner with the session header, another agent named", asAgent, "agent:{B}:{SB}", codes.PermissionDenied, 0},
		{"bridge for a human", bridge, "human:telegram:eve", codes.OK, deny},
		{"bridge for an agent", bridge, "agent:{A}:{SA}", codes.PermissionDenied, 0},
		{"bridge for the host", bridge, "host", codes.PermissionDenied, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := w.count(`SELECT count(*) FROM decisions`)
			resp, err := decide(c.c, c.actor)
			if status.Code(err) != c.code {
				t.Fatalf("code %v (%v), want %v; answer %v", status.Code(err), err, c.code, resp)
			}
			if err == nil && resp.GetDecision().GetEffect() != c.effect {
				t.Fatalf("effect %v, want %v", resp.GetDecision().GetEffect(), c.effect)
			}
			if err != nil && w.count(`SELECT count(*) FROM decisions`) != before {
				t.Fatal("a refused caller's decision was logged")
			}
		})
	}
	// The header's agent is what the log records.
	if n := w.count(`SELECT count(*) FROM decisions WHERE session_id = '{SA}' AND agent_group_id = '{A}' AND runner_id = '{R}'`); n != 2 {
		t.Fatalf("%d runner decisions for {SA}, want 2", n)
	}
}

func TestBadInputIsRefusedAndNothingWritten(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	op := srv.Operator(t)
	big := strings.Repeat("x", 257<<10)
	cases := []struct {
		name  string
		req   *guardv1.DecideRequest
		field string
	}{
		{"missing actor", &guardv1.DecideRequest{Action: "a2a.send"}, "actor"},
		{"actor without a kind", &guardv1.DecideRequest{Action: "a2a.send", Actor: &guardv1.Actor{}}, "actor.kind"},
		{"agent without a group", &guardv1.DecideRequest{Action: "a2a.send", Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{}}}}, "actor.agent.agent_group_id"},
		{"human without a namespace", &guardv1.DecideRequest{Action: "a2a.send", Actor: w.actor("human:eve")}, "actor.human.user_id"},
		{"missing action", &guardv1.DecideRequest{Actor: w.actor("host")}, "action"},
		{"malformed action", &guardv1.DecideRequest{Actor: w.actor("host"), Action: "DROP TABLE"}, "action"},
		{"payload over 256 KiB", &guardv1.DecideRequest{Actor: w.actor("host"), Action: "a2a.send",
			Payload: &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewStringValue(big)}}}, "payload"},
		{"overlong grant", &guardv1.DecideRequest{Actor: w.actor("host"), Action: "a2a.send", Grant: strings.Repeat("g", 200)}, "grant"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := w.count(`SELECT count(*) FROM decisions`)
			_, err := op.Guard.Decide(ctx, c.req)
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), c.field+":") {
				t.Fatalf("got %v, want InvalidArgument naming %q", err, c.field)
			}
			if w.count(`SELECT count(*) FROM decisions`) != before {
				t.Fatal("a refused request was logged")
			}
		})
	}
}

func TestStreamManyInFlightAndBadFrames(t *testing.T) {
	// About frames, not load shedding: on a loaded machine this burst of
	// 300 could shrink the admission limit below what it has in flight,
	// and the last frames were refused (admission_test covers that).
	srv := testserver.Start(t, func(c *config.Config) { c.AdmissionTarget = 0 })
	w := newWorld(t, srv)
	w.exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	stream, err := runner.Guard.DecideStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	want := map[string]string{} // correlation id → "allow" | "deny" | field of the InvalidArgument
	go func() {
		for i := range n {
			id := fmt.Sprintf("c%d", i)
			f := &guardv1.DecideStreamRequest{CorrelationId: id, Request: &guardv1.DecideRequest{
				Action: "a2a.send", Actor: w.actor("agent:{A}:{SA}"), Resource: map[string]string{"to": w.B}}}
			switch i % 10 {
			case 3:
				f.Request.Resource["to"] = w.A + "-nowhere"
			case 5:
				f.Request = nil
			case 7:
				f.Request.Actor = nil
			case 9:
				f.Request.Action = "Not An Action"
			}
			if err := stream.Send(f); err != nil {
				t.Error(err)
				return
			}
		}
		_ = stream.CloseSend()
	}()
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		switch i % 10 {
		case 3:
			want[id] = "deny"
		case 5:
			want[id] = "request"
		case 7:
			want[id] = "actor"
		case 9:
			want[id] = "request.action" // the frame is validated whole
		default:
			want[id] = "allow"
		}
	}
	got := 0
	for {
		r, err := stream.Recv()
		if err != nil {
			break
		}
		got++
		exp, ok := want[r.GetCorrelationId()]
		if !ok {
			t.Fatalf("unknown or repeated correlation id %q", r.GetCorrelationId())
		}
		delete(want, r.GetCorrelationId())
		switch exp {
		case "allow", "deny":
			if r.GetError() != nil || enumword.String(r.GetResponse().GetDecision().GetEffect()) != exp {
				t.Errorf("%s: %v, want %s", r.GetCorrelationId(), r, exp)
			}
		default:
			if r.GetError().GetCode() != int32(codes.InvalidArgument) || !strings.HasPrefix(r.GetError().GetMessage(), exp+":") {
				t.Errorf("%s: %v, want InvalidArgument naming %s", r.GetCorrelationId(), r.GetError(), exp)
			}
		}
	}
	if got != n || len(want) != 0 {
		t.Fatalf("%d answers, %d frames unanswered", got, len(want))
	}
}

// Two replicas, one approved hold, many concurrent replays: exactly one allow.
func TestConcurrentReplaysAcrossReplicasAllowOnce(t *testing.T) {
	one := testserver.Start(t)
	two := testserver.StartOn(t, one.URL)
	w := newWorld(t, one)
	w.exec(approvedHold("{A}-x1", "create_agent", "approved", `{"name":"Scout"}`, false))
	// The second replica re-registered the operator token file's id; its
	// secret is the live operator token on both.
	clients := []testserver.Clients{testserver.ClientsFor(one.Conn(t, two.OperatorToken, "")), two.Operator(t)}
	const n = 24
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		allows int
		denies int
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := agentCreate(w, nil)
			req.Grant = w.sub("{A}-x1")
			resp, err := clients[i%2].Guard.Decide(ctx, req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case resp.GetDecision().GetEffect() == allow:
				allows++
			case resp.GetDecision().GetReason() == guard.ReasonInvalidGrant:
				denies++
			}
		}()
	}
	close(start)
	wg.Wait()
	if allows != 1 || denies != n-1 {
		t.Fatalf("%d allows, %d invalid-grant denies; want 1 and %d", allows, denies, n-1)
	}
}

func TestUnreachableDatabaseDenies(t *testing.T) {
	cat, err := app.BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	eng := guard.NewEngine(cat, pool, guard.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer eng.Close()
	for _, action := range []string{"a2a.send", "groups.list", "some.read"} {
		resp, err := eng.Decide(ctx, &guard.Request{Input: guard.Input{Action: action,
			Actor: &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetDecision().GetEffect() != deny || resp.GetDecision().GetReason() != guard.ReasonFailClosed {
			t.Fatalf("%s with the database down: %v", action, resp)
		}
	}
}

// The boot check: every admin RPC's declared action is in the catalog, and
// a catalog lacking them is reported.
func TestEveryAdminActionExists(t *testing.T) {
	cat, err := app.BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if missing := app.MissingActions(cat); len(missing) != 0 {
		t.Fatalf("missing: %v", missing)
	}
	if missing := app.MissingActions(guard.NewCatalog()); len(missing) < 40 {
		t.Fatalf("an empty catalog reports only %d missing actions", len(missing))
	}
	for _, a := range []string{"agents.create", "a2a.send", "self_mod.install_packages", "self_mod.add_mcp_server", "channels.register", "senders.admit"} {
		if _, ok := cat.Lookup(a); !ok {
			t.Errorf("%s not in the catalog", a)
		}
	}
}
