package registry_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// a2aWorld is the fixture's group A with destinations to B and C, gated by
// message policies naming tg:dana (B) and tg:erin (C).
type a2aWorld struct {
	fixture
	b, c    string
	asAgent testserver.Clients
}

func newA2AWorld(t *testing.T) a2aWorld {
	t.Helper()
	f := setup(t)
	w := a2aWorld{fixture: f, b: group(t, f.srv, "b", ""), c: group(t, f.srv, "c", "")}
	if _, err := f.srv.Pool.Exec(ctxT(t), `INSERT INTO users (id) VALUES ('tg:dana'), ('tg:erin');
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('`+f.group+`', 'b', '`+w.b+`'), ('`+f.group+`', 'c', '`+w.c+`');
		INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('`+f.group+`', '`+w.b+`', 'tg:dana'), ('`+f.group+`', '`+w.c+`', 'tg:erin')`); err != nil {
		t.Fatal(err)
	}
	w.asAgent = testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	return w
}

func (w a2aWorld) send(t *testing.T, to, payloadTo, text, grant string, card bool) *guardv1.DecideResponse {
	t.Helper()
	req := &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": to},
		Payload: payload(t, map[string]any{"to": payloadTo, "text": text}), Grant: grant}
	if card {
		req.Card = &guardv1.HoldCard{Title: "message", Question: "send?", DeliveryAction: "send_message", DedupKey: "k-" + randHex()}
	}
	res, err := w.asAgent.Guard.Decide(ctxT(t), req)
	if err != nil {
		t.Fatalf("decide a2a.send to %s (payload to %s): %v", to, payloadTo, err)
	}
	return res
}

func (w a2aWorld) deliveries(t *testing.T, group string) int {
	t.Helper()
	var n int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM runner_pushes p JOIN sessions s ON s.id = p.session_id
		WHERE s.agent_group_id = $1 AND p.kind = 'deliver'`, group).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Issue 12: a hold decided for resource.to = B (B's policy approver) whose
// card carried payload.to = C was approved by B's approver and delivered to
// C. The disagreement is refused before any hold, and a hold recording the
// decided resource is replayed only for that resource.
func TestA2AGrantIsBoundToTheDecidedTarget(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	res := w.send(t, w.b, w.c, "to C through B's approver", "", true)
	if res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || res.GetHoldId() != "" {
		t.Fatalf("card with resource.to=B, payload.to=C: %v hold %q, want DENY and no hold", res.GetDecision(), res.GetHoldId())
	}
	var holds int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM holds WHERE agent_group_id = $1`, w.group).Scan(&holds); err != nil || holds != 0 {
		t.Fatalf("holds created = %d (%v), want 0", holds, err)
	}

	// A genuine hold for B records its resource; approved, it replays only for B.
	held := w.send(t, w.b, w.b, "hello B", "", true)
	if held.GetHoldId() == "" {
		t.Fatalf("genuine send to B: %v, want a hold", held)
	}
	var resource map[string]string
	if err := w.srv.Pool.QueryRow(ctxT(t), `UPDATE holds SET status = 'approved', resolved_at = now() WHERE id = $1 RETURNING resource`, held.GetHoldId()).Scan(&resource); err != nil || resource["to"] != w.b {
		t.Fatalf("hold's stored resource = %v (%v), want to=%s", resource, err, w.b)
	}
	for _, c := range []struct{ to, payloadTo string }{{w.c, w.c}, {w.b, w.c}, {w.c, w.b}} {
		r := w.send(t, c.to, c.payloadTo, "hello B", held.GetHoldId(), false)
		if r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY {
			t.Fatalf("replay of B's grant as resource.to=%s payload.to=%s: %v, want DENY", c.to, c.payloadTo, r.GetDecision())
		}
	}
	if w.deliveries(t, w.c) != 0 {
		t.Fatal("a message reached C on B's approval")
	}
	ok := w.send(t, w.b, w.b, "hello B", held.GetHoldId(), false)
	if ok.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay for the decided target: %v, want ALLOW", ok.GetDecision())
	}
}

// Issue 12: a self-send is allowed without any grant; naming a pending (or
// an approved and already applied) hold as its grant made the ALLOW carry
// that grant, and ApplyAction delivered the held message with no approval,
// or an approved one-time message again and again.
func TestAnAllowCarriesOnlyAGrantItConsumed(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	held := w.send(t, w.b, w.b, "held for dana", "", true)
	if held.GetHoldId() == "" {
		t.Fatalf("send to B: %v, want a hold", held)
	}
	heldPayload := map[string]any{"to": w.b, "text": "held for dana"}
	smuggle := func(what string) {
		t.Helper()
		self := w.send(t, w.group, w.group, "note to self", held.GetHoldId(), false)
		if self.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
			t.Fatalf("%s: self-send naming the hold: %v, want ALLOW (a self-send needs no grant)", what, self.GetDecision())
		}
		var grant string
		if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT grant_id FROM decisions WHERE id = $1`, self.GetDecisionId()).Scan(&grant); err != nil || grant != "" {
			t.Fatalf("%s: the self-send ALLOW records grant %q (%v), want none", what, grant, err)
		}
		if _, err := w.apply(t, self.GetDecisionId(), "a2a.send", heldPayload, map[string]string{"to": w.b}); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("%s: apply the held message citing the self-send: %v, want PermissionDenied", what, err)
		}
	}
	smuggle("pending hold")
	if n := w.deliveries(t, w.b); n != 0 {
		t.Fatalf("held message delivered %d times with no approval", n)
	}

	if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE holds SET status = 'approved', resolved_at = now() WHERE id = $1`, held.GetHoldId()); err != nil {
		t.Fatal(err)
	}
	replay := w.send(t, w.b, w.b, "held for dana", held.GetHoldId(), false)
	if replay.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("approved replay: %v, want ALLOW", replay.GetDecision())
	}
	if _, err := w.apply(t, replay.GetDecisionId(), "a2a.send", heldPayload, map[string]string{"to": w.b}); err != nil {
		t.Fatalf("apply the approved message: %v", err)
	}
	smuggle("applied hold")
	if n := w.deliveries(t, w.b); n != 1 {
		t.Fatalf("approved one-time message delivered %d times, want 1", n)
	}
}

// Issue 12: only the decision that consumed a hold applies its payload; an
// ALLOW row naming the grant that did not consume it (logged before this
// fix, or forged) is refused and leaves the hold applicable.
func TestOnlyTheConsumingDecisionAppliesAHold(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approved := map[string]any{"apt": []any{"curl"}}
	consuming := grantedAllow(t, f.srv, f.sess.GetId(), "self_mod.install_packages", "install_packages", approved)
	other := allow(t, f.srv, f.sess.GetId(), "self_mod.install_packages", 0)
	if _, err := f.srv.Pool.Exec(ctxT(t), `UPDATE decisions SET grant_id = (SELECT grant_id FROM decisions WHERE id = $1) WHERE id = $2`, consuming, other); err != nil {
		t.Fatal(err)
	}
	_, err := f.apply(t, other, "self_mod.install_packages", approved, nil)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "did not consume") {
		t.Fatalf("apply citing an ALLOW that names the grant but did not consume it: %v, want FailedPrecondition", err)
	}
	if _, err := f.apply(t, consuming, "self_mod.install_packages", approved, nil); err != nil {
		t.Fatalf("apply citing the consuming decision: %v", err)
	}
	assertAppliedOnce(t, f.srv, f.sess.GetId(), "self_mod.install_packages")
}

// Issue 12 (D3 at apply): an ALLOW — or the stored answer a repeated
// request_id gets — is not applied past a revocation made after it.
func TestApplyRechecksTheBaselineLive(t *testing.T) {
	t.Parallel()
	f := setup(t) // a global-scope group: agents.create is allowed
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	name := "child-" + randHex()
	req := &guardv1.DecideRequest{Action: "agents.create", Payload: payload(t, map[string]any{"name": name}), RequestId: "create-1"}
	res, err := asAgent.Guard.Decide(ctxT(t), req)
	if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("agents.create of a trusted group: %v (%v), want ALLOW", res.GetDecision(), err)
	}
	// The operator revokes the trust: agents.create now needs an approval.
	if _, err := f.srv.Pool.Exec(ctxT(t), `UPDATE container_configs SET cli_scope = 'group' WHERE agent_group_id = $1`, f.group); err != nil {
		t.Fatal(err)
	}
	again, err := asAgent.Guard.Decide(ctxT(t), req)
	if err != nil || again.GetDecisionId() != res.GetDecisionId() {
		t.Fatalf("repeated request id: %v (%v), want the stored answer", again, err)
	}
	_, err = f.apply(t, res.GetDecisionId(), "agents.create", map[string]any{"name": name}, nil)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs an approval") {
		t.Fatalf("apply the ALLOW after the revocation: %v, want PermissionDenied (needs an approval)", err)
	}
	var n int
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM agent_groups WHERE name = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("groups named %s = %d (%v), want 0", name, n, err)
	}
}
