package registry_test

import (
	"encoding/json"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// approvedHold inserts an approved, unconsumed hold of the session, as a
// resolve leaves it: the replay the runner is pushed.
func approvedHold(t *testing.T, srv *testserver.Server, sessionID, kind, action string, p map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	hold := "h_" + randHex() + randHex()
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO holds (id, kind, catalog_action, payload, session_id, agent_group_id, status, resolved_at, delivery_action)
		SELECT $1, $2, $3, $4::jsonb, id, agent_group_id, 'approved', now(), $2 FROM sessions WHERE id = $5`,
		hold, kind, action, string(raw), sessionID); err != nil {
		t.Fatal(err)
	}
	return hold
}

// refuseDecisionLog makes every INSERT into the decision log fail, as a
// REVOKE INSERT would for an unprivileged role (the test role is a superuser,
// which REVOKE does not bind); the returned func lifts it. The DDL locks
// every partition while the server's loops write to them: pgtest.Exec runs
// it again if Postgres picks it as a deadlock victim.
func refuseDecisionLog(t *testing.T, srv *testserver.Server) func() {
	t.Helper()
	pgtest.Exec(t, srv.Pool, `
		CREATE FUNCTION refuse_decision_log() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION insufficient_privilege USING MESSAGE = 'permission denied for table decisions'; END $$;
		CREATE TRIGGER refuse_decision_log BEFORE INSERT ON decisions FOR EACH ROW EXECUTE FUNCTION refuse_decision_log()`)
	return func() {
		t.Helper()
		pgtest.Exec(t, srv.Pool, `DROP TRIGGER refuse_decision_log ON decisions; DROP FUNCTION refuse_decision_log()`)
	}
}

func agentActor(group, session string) *guardv1.Actor {
	return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: group, SessionId: session}}}
}

// Issue 13 (1): a replay decided while the decision log refuses inserts was
// answered DENY "guard failure" and the runner acked it: the approval was
// lost. Now it is Unavailable with a retry hint (unary and stream), the grant
// stays unused, a grantless decision still fails closed as DENY, and once
// the log accepts rows again the same replay is allowed and applied once.
func TestReplayDuringALogOutageIsRetryableThenAppliedOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approved := map[string]any{"apt": []any{"curl"}}
	hold := approvedHold(t, f.srv, f.sess.GetId(), "install_packages", "self_mod.install_packages", approved)
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	replay := &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload(t, approved), Grant: hold, RequestId: "replay:" + hold}

	restore := refuseDecisionLog(t, f.srv)
	_, err := asAgent.Guard.Decide(ctxT(t), replay)
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("replay while the log refuses inserts: %v, want Unavailable (retryable), not a final answer", err)
	}
	var hint *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			hint = ri
		}
	}
	if hint == nil || hint.GetRetryDelay().AsDuration() <= 0 {
		t.Fatalf("Unavailable carries no RetryInfo: %v", st.Details())
	}
	ds, err := asAgent.Guard.DecideStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Send(&guardv1.DecideStreamRequest{CorrelationId: "1", Request: replay}); err != nil {
		t.Fatal(err)
	}
	frame, err := ds.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if codes.Code(frame.GetError().GetCode()) != codes.Unavailable || frame.GetError().GetRetryAfter().AsDuration() <= 0 {
		t.Fatalf("stream frame = %v, want StreamError Unavailable with retry_after", frame)
	}
	_ = ds.CloseSend()
	self, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "a2a.send",
		Resource: map[string]string{"to": f.group}, Payload: payload(t, map[string]any{"to": f.group, "text": "note"})})
	if err != nil || self.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || self.GetDecision().GetReason() != guard.ReasonFailClosed {
		t.Fatalf("grantless decision while the log refuses inserts: %v (%v), want DENY failing closed", self.GetDecision(), err)
	}
	var consumed bool
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT consumed_at IS NOT NULL FROM holds WHERE id = $1`, hold).Scan(&consumed); err != nil || consumed {
		t.Fatalf("grant consumed by an undecided replay (%v)", err)
	}

	restore()
	res, err := asAgent.Guard.Decide(ctxT(t), replay)
	if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay once the log accepts rows: %v (%v), want ALLOW", res.GetDecision(), err)
	}
	if _, err := f.apply(t, res.GetDecisionId(), "self_mod.install_packages", approved, nil); err != nil {
		t.Fatalf("apply the approved packages: %v", err)
	}
	again, err := asAgent.Guard.Decide(ctxT(t), replay)
	if err != nil || again.GetDecisionId() != res.GetDecisionId() {
		t.Fatalf("repeated replay: %v (%v), want the same decision %s", again, err, res.GetDecisionId())
	}
	assertAppliedOnce(t, f.srv, f.sess.GetId(), "self_mod.install_packages")
}

// assertAppliedOnce: the session's history records exactly one application
// of action (ApplyAction writes one "action" event per mutation).
func assertAppliedOnce(t *testing.T, srv *testserver.Server, sessionID, action string) {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM session_events WHERE session_id = $1 AND kind = 'action' AND body->>'action' = $2`,
		sessionID, action).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s applied %d times (%v), want exactly once", action, n, err)
	}
}

// Issue 13 (2): a runner killed between the grant's ALLOW and the mutation
// left the approval lost — the takeover runner's replay got "invalid or
// mismatched grant". The replay is idempotent per hold: the session's new
// runner gets the same answer and citation, applies it once, and citing it
// again answers the recorded result without a second application.
func TestTakeoverRunnerFinishesAConsumedReplayOnce(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	g := group(t, srv, "src", "")
	ra := newRunner(t, srv, "runner-a", "h1", nil)
	ra.mustRegister(t)
	sess := ra.open(t, g)
	approved := map[string]any{"apt": []any{"curl"}}
	hold := approvedHold(t, srv, sess.GetId(), "install_packages", "self_mod.install_packages", approved)
	replay := &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload(t, approved), Grant: hold, RequestId: "replay:" + hold}

	asA := testserver.ClientsFor(srv.Conn(t, ra.token, sess.GetId()))
	first, err := asA.Guard.Decide(ctxT(t), replay)
	if err != nil || first.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay on runner A: %v (%v), want ALLOW", first.GetDecision(), err)
	}
	// Runner A dies before applying; runner B takes the session over.
	expireLease(t, srv, ra.id)
	rb := newRunner(t, srv, "runner-b", "h2", nil)
	rb.mustRegister(t)
	if moved := rb.open(t, g); moved.GetId() != sess.GetId() || moved.GetRunnerId() != rb.id {
		t.Fatalf("takeover: session %s on %q, want %s on %s", moved.GetId(), moved.GetRunnerId(), sess.GetId(), rb.id)
	}
	asB := testserver.ClientsFor(srv.Conn(t, rb.token, sess.GetId()))
	second, err := asB.Guard.Decide(ctxT(t), replay)
	if err != nil || second.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW || second.GetDecisionId() != first.GetDecisionId() {
		t.Fatalf("replay on the takeover runner: %v id %q (%v), want ALLOW citing %s", second.GetDecision(), second.GetDecisionId(), err, first.GetDecisionId())
	}
	apply := &guardv1.ApplyActionRequest{DecisionId: second.GetDecisionId(), SessionId: sess.GetId(), Action: "self_mod.install_packages", Payload: payload(t, approved)}
	if _, err := ra.c.Registry.ApplyAction(ctxT(t), apply); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the dead runner applies: %v, want PermissionDenied", err)
	}
	res, err := rb.c.Registry.ApplyAction(ctxT(t), apply)
	if err != nil {
		t.Fatalf("the takeover runner applies the citation: %v", err)
	}
	again, err := rb.c.Registry.ApplyAction(ctxT(t), apply)
	if err != nil || again.GetMessage() != res.GetMessage() {
		t.Fatalf("citing it again: %v (%v), want the recorded result %q", again, err, res.GetMessage())
	}
	third, err := asB.Guard.Decide(ctxT(t), replay)
	if err != nil || third.GetDecisionId() != first.GetDecisionId() {
		t.Fatalf("replay after the application: %v (%v), want the same citation", third, err)
	}
	assertAppliedOnce(t, srv, sess.GetId(), "self_mod.install_packages")
	var apt []string
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT apt_packages FROM container_configs WHERE agent_group_id = $1`, g).Scan(&apt); err != nil || len(apt) != 1 {
		t.Fatalf("apt = %v (%v), want [curl]", apt, err)
	}
}
