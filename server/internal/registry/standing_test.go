package registry_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// standingWorld is the a2a world with dana's own clients (she approves
// A→B) and a held first send to B she approved "for 1 hour".
type standingWorld struct {
	a2aWorld
	dana  testserver.Clients
	grant *guardv1.StandingGrant
	text  string
}

func newStandingWorld(t *testing.T, opts ...testserver.Option) standingWorld {
	t.Helper()
	w := standingWorld{a2aWorld: newA2AWorld(t), text: "hourly report: all green"}
	w.dana = testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "user", "", "tg:dana"), ""))
	first := w.send(t, w.b, w.b, w.text, "", true)
	if first.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD || first.GetHoldId() == "" {
		t.Fatalf("first send to B: %v, want a hold", first)
	}
	res, err := w.dana.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: first.GetHoldId(),
		Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingFor: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatalf("dana approves for 1 hour: %v", err)
	}
	if w.grant = res.GetStandingGrant(); w.grant.GetId() == "" {
		t.Fatalf("approve for 1 hour made no standing grant: %v", res)
	}
	if left := time.Until(w.grant.GetExpiresAt().AsTime()); left < 59*time.Minute || left > time.Hour {
		t.Fatalf("standing grant expires in %s, want 1h", left)
	}
	return w
}

// sendCard sends text to B with a card, as a runner does.
func (w standingWorld) sendTo(t *testing.T, to, text string) *guardv1.DecideResponse {
	t.Helper()
	return w.send(t, to, to, text, "", true)
}

func (w standingWorld) holds(t *testing.T) int {
	t.Helper()
	var n int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM holds WHERE agent_group_id = $1`, w.group).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantStandingAllow(t *testing.T, res *guardv1.DecideResponse, what string) {
	t.Helper()
	d := res.GetDecision()
	if d.GetEffect() != guardv1.Effect_EFFECT_ALLOW || d.GetDecidedBy() != guard.ByStanding ||
		!strings.Contains(d.GetReason(), "tg:dana") || !strings.Contains(d.GetReason(), "until") || res.GetHoldId() != "" {
		t.Fatalf("%s: %v hold %q, want an ALLOW decided by %q naming tg:dana and until when", what, d, res.GetHoldId(), guard.ByStanding)
	}
}

func wantHeld(t *testing.T, res *guardv1.DecideResponse, what string) {
	t.Helper()
	if res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("%s: %v, want HOLD", what, res.GetDecision())
	}
}

// Issue 32: a repeated identical send approved "for 1 hour" asks a human
// once in 20 sends; every use is a logged ALLOW decided by "standing
// grant" and applies exactly the approved message.
func TestStandingGrantAsksOnceInTwentySends(t *testing.T) {
	t.Parallel()
	w := newStandingWorld(t)
	for i := 2; i <= 20; i++ {
		res := w.sendTo(t, w.b, w.text)
		wantStandingAllow(t, res, "send "+string(rune('0'+i%10)))
		if _, err := w.apply(t, res.GetDecisionId(), "a2a.send", map[string]any{"to": w.b, "text": w.text}, map[string]string{"to": w.b}); err != nil {
			t.Fatalf("apply send %d: %v", i, err)
		}
	}
	if n := w.holds(t); n != 1 {
		t.Fatalf("holds for 20 identical sends = %d, want 1 (a human asked once)", n)
	}
	var logged, uses int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM decisions WHERE agent_group_id = $1 AND effect = 'allow' AND decided_by = $2 AND hold_id = $3`,
		w.group, guard.ByStanding, w.grant.GetId()).Scan(&logged); err != nil || logged != 19 {
		t.Fatalf("logged standing-grant ALLOWs = %d (%v), want 19", logged, err)
	}
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT uses FROM standing_grants WHERE id = $1`, w.grant.GetId()).Scan(&uses); err != nil || uses != 19 {
		t.Fatalf("uses = %d (%v), want 19", uses, err)
	}
	// A standing ALLOW applies only the approved message.
	res := w.sendTo(t, w.b, w.text)
	wantStandingAllow(t, res, "send 21")
	if _, err := w.apply(t, res.GetDecisionId(), "a2a.send", map[string]any{"to": w.b, "text": "something else"}, map[string]string{"to": w.b}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("apply another text citing a standing ALLOW: %v, want PermissionDenied", err)
	}
	// Listed for dana, not for erin (who may not resolve A→B's holds).
	list, err := w.dana.Approvals.ListStandingGrants(ctxT(t), &guardv1.ListStandingGrantsRequest{})
	if err != nil || len(list.GetGrants()) != 1 || list.GetGrants()[0].GetUses() != 20 {
		t.Fatalf("dana's standing grants: %v (%v), want the one, used 20 times", list, err)
	}
	erin := testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "user", "", "tg:erin"), ""))
	if list, err := erin.Approvals.ListStandingGrants(ctxT(t), &guardv1.ListStandingGrantsRequest{}); err != nil || len(list.GetGrants()) != 0 {
		t.Fatalf("erin's standing grants: %v (%v), want none", list, err)
	}
	if _, err := erin.Approvals.RevokeStandingGrant(ctxT(t), &guardv1.RevokeStandingGrantRequest{Id: w.grant.GetId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("erin revokes dana's grant: %v, want NotFound", err)
	}
}

// Issue 32: another target, other text, expiry, revocation and an approver
// the policy no longer names each ask a human again; an ALLOW given before
// a revocation is not applied after it.
func TestStandingGrantIsNeverBroaderThanTheRequest(t *testing.T) {
	t.Parallel()
	w := newStandingWorld(t)
	wantHeld(t, w.sendTo(t, w.c, w.text), "the same text to another target")
	wantHeld(t, w.sendTo(t, w.b, w.text+"!"), "other text to the same target")
	wantStandingAllow(t, w.sendTo(t, w.b, w.text), "the approved send")

	// Expired (time moved in the table, not waited for), then back.
	setExpiry := func(sql string) {
		t.Helper()
		if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE standing_grants SET `+sql+` WHERE id = $1`, w.grant.GetId()); err != nil {
			t.Fatal(err)
		}
	}
	setExpiry(`created_at = now() - interval '2 hours', expires_at = now() - interval '1 second'`)
	wantHeld(t, w.sendTo(t, w.b, w.text), "after expiry")
	setExpiry(`expires_at = now() + interval '1 hour'`)
	wantStandingAllow(t, w.sendTo(t, w.b, w.text), "expiry restored")

	// The policy names erin now: dana's grant no longer stands.
	if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE agent_message_policies SET approver_user_id = 'tg:erin' WHERE from_agent_group_id = $1 AND to_agent_group_id = $2`, w.group, w.b); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, w.sendTo(t, w.b, w.text), "the policy names another approver")
	if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE agent_message_policies SET approver_user_id = 'tg:dana' WHERE from_agent_group_id = $1 AND to_agent_group_id = $2`, w.group, w.b); err != nil {
		t.Fatal(err)
	}

	// Revoked: an ALLOW decided before is not applied after, and the next
	// send is held again.
	before := w.sendTo(t, w.b, w.text)
	wantStandingAllow(t, before, "before revocation")
	rev, err := w.dana.Approvals.RevokeStandingGrant(ctxT(t), &guardv1.RevokeStandingGrantRequest{Id: w.grant.GetId()})
	if err != nil || rev.GetGrant().GetRevokedBy() != "tg:dana" || rev.GetGrant().GetRevokedAt() == nil {
		t.Fatalf("dana revokes: %v (%v)", rev, err)
	}
	if _, err := w.apply(t, before.GetDecisionId(), "a2a.send", map[string]any{"to": w.b, "text": w.text}, map[string]string{"to": w.b}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("apply an ALLOW of a revoked standing grant: %v, want PermissionDenied", err)
	}
	wantHeld(t, w.sendTo(t, w.b, w.text), "after revocation")

	// A removed destination denies, standing grant or not.
	if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE standing_grants SET revoked_at = NULL WHERE id = $1;`, w.grant.GetId()); err != nil {
		t.Fatal(err)
	}
	wantStandingAllow(t, w.sendTo(t, w.b, w.text), "revocation undone")
	if _, err := w.srv.Pool.Exec(ctxT(t), `DELETE FROM agent_destinations WHERE agent_group_id = $1 AND target_agent_group_id = $2`, w.group, w.b); err != nil {
		t.Fatal(err)
	}
	if d := w.sendTo(t, w.b, w.text).GetDecision(); d.GetEffect() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("after the destination was removed: %v, want DENY", d)
	}
}

// Issue 32: concurrent uses on two replicas of one database are all
// allowed and all logged.
func TestStandingGrantConcurrentUsesAcrossReplicas(t *testing.T) {
	t.Parallel()
	w := newStandingWorld(t)
	second := testserver.StartOn(t, w.srv.URL)
	agents := []testserver.Clients{w.asAgent, testserver.ClientsFor(second.Conn(t, w.r.token, w.sess.GetId()))}
	const each = 8
	var wg sync.WaitGroup
	errs := make(chan string, 2*each)
	for _, c := range agents {
		for range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": w.b},
					Payload: payload(t, map[string]any{"to": w.b, "text": w.text}),
					Card:    &guardv1.HoldCard{Title: "message", Question: "send?", DeliveryAction: "send_message", DedupKey: "k-" + randHex()}})
				switch {
				case err != nil:
					errs <- err.Error()
				case res.GetDecision().GetDecidedBy() != guard.ByStanding:
					errs <- res.GetDecision().String()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent use: %s, want an ALLOW by standing grant", e)
	}
	var logged, uses int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM decisions WHERE decided_by = $1 AND hold_id = $2`, guard.ByStanding, w.grant.GetId()).Scan(&logged); err != nil || logged != 2*each {
		t.Fatalf("logged = %d (%v), want %d", logged, err, 2*each)
	}
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT uses FROM standing_grants WHERE id = $1`, w.grant.GetId()).Scan(&uses); err != nil || uses != 2*each {
		t.Fatalf("uses = %d (%v), want %d", uses, err, 2*each)
	}
	if n := w.holds(t); n != 1 {
		t.Fatalf("holds = %d, want 1", n)
	}
}

// Issue 32: a global-scope hold (D1) cannot be approved as a standing
// grant — refused clearly, FailedPrecondition — and approving it once still
// works; a standing request on a reject is invalid.
func TestStandingGrantRefusedForGlobalScopeHolds(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	owner := "tg:olga"
	if _, err := w.srv.Pool.Exec(ctxT(t), `WITH u AS (INSERT INTO users (id) VALUES ($1) RETURNING id) INSERT INTO user_roles (user_id, role) SELECT id, 'owner' FROM u`, owner); err != nil {
		t.Fatal(err)
	}
	var hold string
	err := pgx.BeginFunc(ctxT(t), w.srv.Pool, func(tx pgx.Tx) error {
		res, err := w.srv.Deps().Approvals.CreateHoldTx(ctxT(t), tx, approvals.CreateRequest{
			Kind: "a2a_send", CatalogAction: "a2a.send", Payload: payload(t, map[string]any{"to": w.b, "text": "x"}),
			Resource: map[string]string{"to": w.b}, SessionID: w.sess.GetId(), AgentGroupID: w.group,
			Requester: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: w.group, SessionId: w.sess.GetId()}}},
			Rule:      guard.AdminsOfScope("", ""), Scope: guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL, Title: "global",
		})
		hold = res.Hold.GetId()
		return err
	})
	if err != nil || hold == "" {
		t.Fatalf("create a global-scope hold: %v", err)
	}
	olga := testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "user", "", owner), ""))
	_, err = olga.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingFor: durationpb.New(time.Hour)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "global-scope") {
		t.Fatalf("approve a global-scope hold for 1 hour: %v, want FailedPrecondition naming global scope", err)
	}
	_, err = olga.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_REJECT, StandingSession: true})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("reject with a standing request: %v, want InvalidArgument", err)
	}
	res, err := olga.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE})
	if err != nil || res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED || res.GetStandingGrant() != nil {
		t.Fatalf("approve it once: %v (%v), want approved and no standing grant", res, err)
	}
	var n int
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM standing_grants`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("standing grants = %d (%v), want 0", n, err)
	}
}

// Issue 32: a standing grant of an admin-chain hold stands only while
// every approver who gave it still holds the role that let them.
func TestStandingGrantEndsWithTheApproversRole(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	if _, err := w.srv.Pool.Exec(ctxT(t), `WITH u AS (INSERT INTO users (id) VALUES ('tg:gina') RETURNING id) INSERT INTO user_roles (user_id, role, agent_group_id) SELECT id, 'admin', $1 FROM u`, w.group); err != nil {
		t.Fatal(err)
	}
	rule := guard.AdminsOfScope(w.group, "")
	may := func() bool {
		t.Helper()
		ok, err := approvals.ApproversMay(ctxT(t), w.srv.Pool, rule, guardv1.ApproverScope_APPROVER_SCOPE_GROUP, []string{"tg:gina"})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !may() {
		t.Fatal("gina, admin of the group, does not stand for its admin-chain hold")
	}
	if ok, _ := approvals.ApproversMay(ctxT(t), w.srv.Pool, rule, guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL, []string{"tg:gina"}); ok {
		t.Fatal("a standing grant stands for a global-scope hold")
	}
	if _, err := w.srv.Pool.Exec(ctxT(t), `DELETE FROM user_roles WHERE user_id = 'tg:gina'`); err != nil {
		t.Fatal(err)
	}
	if may() {
		t.Fatal("gina's standing grant still stands after her role was revoked")
	}
}
