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
	"google.golang.org/protobuf/proto"
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

func TestHoldWithCardCreatesOnceAndDedups(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := newWorld(t, srv)
	withOwner(w)
	// A caller-chosen kind is ignored: the hold's kind is the entry's
	// approval action, so its approval cannot grant another action.
	card := &guardv1.HoldCard{Title: "New agent", Question: "Create Scout?", DedupKey: w.sub("create:{A}:Scout"), Kind: "install_packages"}

	first, err := op.Guard.Decide(ctx, agentCreate(w, card))
	if err != nil {
		t.Fatal(err)
	}
	if first.GetDecision().GetEffect() != hold || first.GetHoldId() == "" || !first.GetHoldCreated() || first.GetHoldError() != "" {
		t.Fatalf("first: %v", first)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + first.GetHoldId() + `' AND kind = 'create_agent' AND session_id = '{SA}'
		AND agent_group_id = '{A}' AND status = 'pending' AND catalog_action = 'agents.create'`); n != 1 {
		t.Fatalf("hold row not as expected (%d)", n)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE id = '` + first.GetDecisionId() + `' AND hold_id = '` + first.GetHoldId() + `'`); n != 1 {
		t.Fatal("decision log row does not name the hold")
	}
	second, err := op.Guard.Decide(ctx, agentCreate(w, card))
	if err != nil {
		t.Fatal(err)
	}
	if second.GetHoldId() != first.GetHoldId() || second.GetHoldCreated() {
		t.Fatalf("dedup: %v, want hold %s not created", second, first.GetHoldId())
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE session_id = '{SA}'`); n != 1 {
		t.Fatalf("%d holds, want 1", n)
	}
}

// Issue 41 item 4: a gate that holds when nobody may approve makes no hold,
// and the answer, the decision log and the dry run (ncl explain) all say
// what the agent was told: a deny, naming why and the fix — never a HOLD
// with no hold behind it, which an auditor takes for one pending.
func TestAHoldNobodyCanApproveIsADenyEverywhere(t *testing.T) {
	srv := testserver.Start(t) // a fresh database: no owner, no admin anywhere
	w := newWorld(t, srv)
	op := srv.Operator(t)
	resp, err := op.Guard.Decide(ctx, agentCreate(w, &guardv1.HoldCard{Title: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.GetDecision()
	if d.GetEffect() != guardv1.Effect_EFFECT_DENY || d.GetDecidedBy() != guard.ByNoApprover || resp.GetHoldId() != "" ||
		!strings.Contains(d.GetReason(), "no hold was made") || !strings.Contains(d.GetReason(), "fix: ncl roles grant") {
		t.Fatalf("want a DENY naming why no hold was made and the fix: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds`); n != 0 {
		t.Fatalf("%d holds created", n)
	}
	logged, err := op.Registry.GetDecision(ctx, &guardv1.GetDecisionRequest{Id: resp.GetDecisionId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := logged.GetDecision(); got.GetEffect() != guardv1.Effect_EFFECT_DENY || got.GetReason() != d.GetReason() || got.GetHoldId() != "" {
		t.Fatalf("the log records %v, want the deny the agent was told", got)
	}
	if !explainsNoHold(logged.GetDecision().GetExplanation()) {
		t.Errorf("ncl decisions get explains %v: want the approvers check and its fix", logged.GetDecision().GetExplanation())
	}
	dry := agentCreate(w, nil)
	dry.DryRun = true
	x, err := op.Guard.Decide(ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	if x.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || !explainsNoHold(x.GetExplanation()) {
		t.Fatalf("ncl explain answers %v: want the deny the decision gives", x)
	}
}

// The README's own quorum line with one eligible approver: the same deny,
// naming the setting the quorum comes from.
func TestAQuorumNobodyCanMeetIsADenyEverywhere(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	withOwner(w)
	w.exec(`INSERT INTO action_settings (action, approvals) VALUES ('agents.create', 2)`)
	op := srv.Operator(t)
	resp, err := op.Guard.Decide(ctx, agentCreate(w, &guardv1.HoldCard{Title: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetDecision().GetReason(); resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY ||
		!strings.Contains(r, "needs 2 distinct approvals") || !strings.Contains(r, "ncl catalog set --action agents.create --approvals") {
		t.Fatalf("want a DENY naming the quorum's setting: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds`); n != 0 {
		t.Fatalf("%d holds created", n)
	}
	dry := agentCreate(w, nil)
	dry.DryRun = true
	if x, err := op.Guard.Decide(ctx, dry); err != nil || x.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || !explainsNoHold(x.GetExplanation(), "ncl catalog set") {
		t.Fatalf("ncl explain answers %v %v: want the deny the decision gives", x, err)
	}
}

func explainsNoHold(x *guardv1.Explanation, fix ...string) bool {
	if len(fix) == 0 {
		fix = []string{"ncl roles grant"}
	}
	for _, c := range x.GetChecks() {
		if c.GetName() == "approvers" && c.GetOutcome() == "deny" {
			return len(x.GetWouldChange()) > 0 && strings.Contains(x.GetWouldChange()[0], fix[0])
		}
	}
	return false
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

func TestRequestIDIsIdempotent(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	withOwner(w)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	req := agentCreate(w, &guardv1.HoldCard{Title: "x"})
	req.RequestId = "retry-1"
	first, err := runner.Guard.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := runner.Guard.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(first, again) || first.GetHoldId() == "" {
		t.Fatalf("retry answered differently:\n%v\n%v", first, again)
	}
	if n := w.count(`SELECT count(*) FROM holds`); n != 1 {
		t.Fatalf("%d holds, want 1", n)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'retry-1'`); n != 1 {
		t.Fatalf("%d decisions, want 1", n)
	}
	// The same request id with a grant: the retry of an allowed replay is
	// the same allow (same citation), not a second consume.
	w.exec(approvedHold("{A}-i1", "create_agent", "approved", `{"name":"Scout"}`, false))
	rep := agentCreate(w, nil)
	rep.Grant, rep.RequestId = w.sub("{A}-i1"), "retry-2"
	a, err := runner.Guard.Decide(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	b, err := runner.Guard.Decide(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	if a.GetDecision().GetEffect() != allow || a.GetDecisionId() != b.GetDecisionId() {
		t.Fatalf("replay retry: %v / %v", a, b)
	}
}

// The consume and the replay's log row are one statement: a replay whose
// request id another decision claimed after it read its facts is not
// logged, and its grant stays unused for a later replay. (A claim with no
// stored answer stands in for that race: the facts read finds no prior
// answer, the claim then conflicts.)
func TestReplayWhoseRequestIDIsTakenLeavesTheGrantUnused(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	w.exec(approvedHold("{A}-taken", "create_agent", "approved", `{"name":"Scout"}`, false))
	w.exec(`INSERT INTO decision_requests (runner_id, request_id, decision_id, at) VALUES ('{R}', 'taken-1', 'dec_other', now())`)
	rep := agentCreate(w, nil)
	rep.Grant, rep.RequestId = w.sub("{A}-taken"), "taken-1"
	if resp, err := runner.Guard.Decide(ctx, rep); err == nil && resp.GetDecision().GetEffect() == allow {
		t.Fatalf("a replay whose request id was taken was allowed: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '{A}-taken' AND consumed_at IS NULL AND consumed_by IS NULL`); n != 1 {
		t.Fatal("the grant was consumed by a replay that was not logged")
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE grant_id = '{A}-taken'`); n != 0 {
		t.Fatalf("%d decisions logged for the refused replay", n)
	}
	// The grant still serves the replay under a fresh request id.
	rep.RequestId = "taken-2"
	if resp, err := runner.Guard.Decide(ctx, rep); err != nil || resp.GetDecision().GetEffect() != allow {
		t.Fatalf("the replay again: %v %v, want ALLOW", resp, err)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '{A}-taken' AND consumed_by IS NOT NULL`); n != 1 {
		t.Fatal("the second replay did not consume the grant")
	}
}

// A held decision's log row goes out with the hold's requested event, in
// one round trip: when its request id was claimed meanwhile (a claim with
// no stored answer stands in for that race, as above), the row's conflict
// still fails the transaction, so neither the hold nor its event is left.
func TestHoldWhoseRequestIDIsTakenLeavesNoHold(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	withOwner(w)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	w.exec(`INSERT INTO decision_requests (runner_id, request_id, decision_id, at) VALUES ('{R}', 'taken-h', 'dec_other', now())`)
	req := agentCreate(w, &guardv1.HoldCard{Title: "x"})
	req.RequestId = "taken-h"
	if resp, err := runner.Guard.Decide(ctx, req); err == nil && resp.GetHoldCreated() {
		t.Fatalf("a held decision whose request id was taken created a hold: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE session_id = '{SA}'`); n != 0 {
		t.Fatalf("%d holds left by a held decision that was not logged", n)
	}
	if n := w.count(`SELECT count(*) FROM hold_events e JOIN holds h ON h.id = e.hold_id WHERE h.session_id = '{SA}'`); n != 0 {
		t.Fatalf("%d hold events left by a held decision that was not logged", n)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'taken-h'`); n != 0 {
		t.Fatalf("%d decisions logged under the taken request id", n)
	}
	// Under a fresh request id the same decision holds, logged with its hold.
	req.RequestId = "fresh-h"
	resp, err := runner.Guard.Decide(ctx, req)
	if err != nil || !resp.GetHoldCreated() {
		t.Fatalf("the decision again: %v %v, want a created hold", resp, err)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'fresh-h' AND hold_id = '` + resp.GetHoldId() + `'`); n != 1 {
		t.Fatal("the held decision's log row does not name its hold")
	}
	if n := w.count(`SELECT count(*) FROM hold_events WHERE hold_id = '` + resp.GetHoldId() + `' AND type = 'requested'`); n != 1 {
		t.Fatal("the created hold has no requested event")
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

// Concurrent retries of one request id race past the facts read; the log's
// unique key settles them and every caller gets the winner's answer.
func TestConcurrentRetriesOfOneRequestIDAgree(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	w.exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	const n = 12
	ids := make(chan string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := runner.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Actor: w.actor("agent:{A}:{SA}"),
				Resource: map[string]string{"to": w.B}, RequestId: "same"})
			if err != nil || resp.GetDecision().GetEffect() != allow {
				t.Errorf("%v %v", resp, err)
				return
			}
			ids <- resp.GetDecisionId()
		}()
	}
	close(start)
	wg.Wait()
	close(ids)
	first := ""
	for id := range ids {
		if first == "" {
			first = id
		}
		if id != first {
			t.Fatalf("retries answered with different decisions: %s and %s", first, id)
		}
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'same' AND runner_id = '{R}'`); n != 1 {
		t.Fatalf("%d decisions logged for one request id", n)
	}
}
