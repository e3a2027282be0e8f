package registry_test

import (
	"strings"
	"sync"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func replayPushes(t *testing.T, srv *testserver.Server, hold string) (total, inFlight int) {
	t.Helper()
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT count(*), count(*) FILTER (WHERE acked_at IS NULL) FROM runner_pushes WHERE hold_id = $1`, hold).Scan(&total, &inFlight); err != nil {
		t.Fatal(err)
	}
	return total, inFlight
}

func unapplied(t *testing.T, srv *testserver.Server, hold string) string {
	t.Helper()
	res, err := srv.Operator(t).Approvals.Get(ctxT(t), &guardv1.GetRequest{Id: hold})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetHold().GetUnappliedReason()
}

// Issue 13: an approved hold whose replay was acked without being applied
// (the old fail-closed DENY) stayed approved and unused forever. Replicas
// reconcile: exactly one re-sends the replay (SKIP LOCKED), none while it is
// in flight, and the re-sent replay applies the approval once.
func TestReconcilerResendsAnUnappliedApprovalOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	other := testserver.StartOn(t, f.srv.URL)
	approved := map[string]any{"apt": []any{"curl"}}
	hold := approvedHold(t, f.srv, f.sess.GetId(), "install_packages", "self_mod.install_packages", approved)

	var wg sync.WaitGroup
	for _, s := range []*testserver.Server{f.srv, other, f.srv, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Deps().Approvals.ReconcileReplays(ctxT(t), 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if total, inFlight := replayPushes(t, f.srv, hold); total != 1 || inFlight != 1 {
		t.Fatalf("replay pushes after concurrent reconciles = %d (%d in flight), want exactly 1", total, inFlight)
	}
	if resent, _, err := f.srv.Deps().Approvals.ReconcileReplays(ctxT(t), 0); err != nil || resent != 0 {
		t.Fatalf("reconcile with the replay in flight re-sent %d (%v), want 0", resent, err)
	}

	// The runner replays it (the push's payload is the approved one) and applies.
	st := f.r.connect(t)
	p := st.next(t)
	if p.GetReplay().GetHoldId() != hold {
		t.Fatalf("push = %v, want the replay of %s", p, hold)
	}
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	res, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: p.GetReplay().GetCatalogAction(), Payload: p.GetReplay().GetPayload(),
		Resource: p.GetReplay().GetResource(), Grant: hold, RequestId: "replay:" + hold})
	if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay: %v (%v), want ALLOW", res.GetDecision(), err)
	}
	if _, err := f.apply(t, res.GetDecisionId(), "self_mod.install_packages", approved, nil); err != nil {
		t.Fatalf("apply: %v", err)
	}
	st.ack(t, p.GetId())
	eventually(t, "the replay push acked", func() bool { _, inFlight := replayPushes(t, f.srv, hold); return inFlight == 0 })
	if resent, gaveUp, err := f.srv.Deps().Approvals.ReconcileReplays(ctxT(t), 0); err != nil || resent != 0 || gaveUp != 0 {
		t.Fatalf("reconcile after the application: resent %d, gave up %d (%v), want nothing", resent, gaveUp, err)
	}
	assertAppliedOnce(t, f.srv, f.sess.GetId(), "self_mod.install_packages")
}

// Giving up is never silent: a replay the live baseline denied (D3), or one
// re-sent MaxReplayAttempts times, ends with the reason on the hold (what
// approvers see in Approvals.Get/List) and a FAILED notice to the requester.
func TestReconcilerGivesUpWithAReason(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	held := w.send(t, w.b, w.b, "hello B", "", true)
	if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE holds SET status = 'approved', resolved_at = now() WHERE id = $1`, held.GetHoldId()); err != nil {
		t.Fatal(err)
	}
	// Revoked after the approval: the replay is denied (and its push acked).
	if _, err := w.srv.Pool.Exec(ctxT(t), `DELETE FROM agent_destinations WHERE agent_group_id = $1 AND target_agent_group_id = $2`, w.group, w.b); err != nil {
		t.Fatal(err)
	}
	if r := w.send(t, w.b, w.b, "hello B", held.GetHoldId(), false); r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("replay after the revocation: %v, want DENY", r.GetDecision())
	}
	stuck := approvedHold(t, w.srv, w.sess.GetId(), "install_packages", "self_mod.install_packages", map[string]any{"apt": []any{"jq"}})
	if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE holds SET replay_attempts = $2 WHERE id = $1`, stuck, approvals.MaxReplayAttempts); err != nil {
		t.Fatal(err)
	}

	resent, gaveUp, err := w.srv.Deps().Approvals.ReconcileReplays(ctxT(t), 0)
	if err != nil || resent != 0 || gaveUp != 2 {
		t.Fatalf("reconcile: resent %d, gave up %d (%v), want 0 and 2", resent, gaveUp, err)
	}
	if why := unapplied(t, w.srv, held.GetHoldId()); !strings.Contains(why, "denied") || !strings.Contains(why, "no destination") {
		t.Fatalf("denied hold's unapplied reason = %q, want the deny's reason", why)
	}
	if why := unapplied(t, w.srv, stuck); !strings.Contains(why, "attempts") {
		t.Fatalf("exhausted hold's unapplied reason = %q, want the attempt count", why)
	}
	var notices int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM runner_pushes WHERE session_id = $1 AND kind = 'notify'`, w.sess.GetId()).Scan(&notices); err != nil || notices != 2 {
		t.Fatalf("requester notices = %d (%v), want 2", notices, err)
	}
	// The approvers are told too: one unapplied event per hold, carrying why.
	var events int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM hold_events WHERE type = 'unapplied' AND hold_id = ANY($1)
		AND hold->>'unappliedReason' <> ''`, []string{held.GetHoldId(), stuck}).Scan(&events); err != nil || events != 2 {
		t.Fatalf("unapplied events = %d (%v), want 2", events, err)
	}
	if resent, gaveUp, err := w.srv.Deps().Approvals.ReconcileReplays(ctxT(t), 0); err != nil || resent+gaveUp != 0 {
		t.Fatalf("reconcile again: resent %d, gave up %d (%v), want nothing (terminal)", resent, gaveUp, err)
	}
}
