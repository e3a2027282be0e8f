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
	"github.com/clawguard/clawguard/server/internal/config"
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

// Issue 32: "for this session" stands only for the session that asked.
func TestStandingGrantForTheSessionOnly(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	dana := testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "user", "", "tg:dana"), ""))
	held := w.send(t, w.b, w.b, "ping", "", true)
	res, err := dana.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: held.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingSession: true})
	if err != nil || res.GetStandingGrant().GetSessionId() != w.sess.GetId() {
		t.Fatalf("approve for the session: %v (%v), want a grant bound to %s", res.GetStandingGrant(), err, w.sess.GetId())
	}
	wantStandingAllow(t, w.send(t, w.b, w.b, "ping", "", true), "the same session")
	other := "se_other_" + randHex()
	if _, err := w.srv.Pool.Exec(ctxT(t), `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ($1, $2, $3)`, other, w.group, w.r.id); err != nil {
		t.Fatal(err)
	}
	asOther := testserver.ClientsFor(w.srv.Conn(t, w.r.token, other))
	r, err := asOther.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": w.b},
		Payload: payload(t, map[string]any{"to": w.b, "text": "ping"}),
		Card:    &guardv1.HoldCard{Title: "message", Question: "send?", DeliveryAction: "send_message", DedupKey: "k-" + randHex()}})
	if err != nil {
		t.Fatal(err)
	}
	wantHeld(t, r, "another session of the group")
}

// Issue 32: on a quorum hold the standing grant exists only once the
// quorum is met, and only when every counted approval asked for one (the
// shortest time wins).
func TestStandingGrantNeedsTheWholeQuorum(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	if _, err := w.srv.Pool.Exec(ctxT(t), `UPDATE agent_message_policies SET also_approvers = '{tg:erin}', approvals = 2
		WHERE from_agent_group_id = $1 AND to_agent_group_id = $2`, w.group, w.b); err != nil {
		t.Fatal(err)
	}
	dana := testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "user", "", "tg:dana"), ""))
	erin := testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "user", "", "tg:erin"), ""))
	approve := func(c testserver.Clients, hold string, d time.Duration) *guardv1.ResolveResponse {
		t.Helper()
		req := &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE}
		if d > 0 {
			req.StandingFor = durationpb.New(d)
		}
		res, err := c.Approvals.Resolve(ctxT(t), req)
		if err != nil {
			t.Fatalf("approve %s: %v", hold, err)
		}
		return res
	}
	// Dana asks for 8 hours, Erin approves once: once it is.
	first := w.send(t, w.b, w.b, "quorum report", "", true)
	if res := approve(dana, first.GetHoldId(), 8*time.Hour); res.GetStandingGrant() != nil || res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("the first of two approvals: %v, want pending and no standing grant", res)
	}
	if res := approve(erin, first.GetHoldId(), 0); res.GetStandingGrant() != nil || res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("quorum met, one approval once: %v, want approved and no standing grant", res)
	}
	wantHeld(t, w.send(t, w.b, w.b, "quorum report", "", true), "after a quorum that did not all ask to stand")
	// Both ask: the shortest stands.
	second := w.send(t, w.b, w.b, "quorum report 2", "", true)
	approve(dana, second.GetHoldId(), 8*time.Hour)
	g := approve(erin, second.GetHoldId(), time.Hour).GetStandingGrant()
	if left := time.Until(g.GetExpiresAt().AsTime()); g == nil || left > time.Hour || left < 59*time.Minute || len(g.GetApprovedBy()) != 2 {
		t.Fatalf("both asked (8h, 1h): %v, want 1h approved by both", g)
	}
	wantStandingAllow(t, w.send(t, w.b, w.b, "quorum report 2", "", true), "after both asked")
}

// Issue 32: an action marked step-up is asked every time.
func TestStandingGrantRefusedForStepUpActions(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	if _, err := w.srv.Pool.Exec(ctxT(t), `INSERT INTO action_settings (action, step_up) VALUES ('a2a.send', true)
		ON CONFLICT (action) DO UPDATE SET step_up = true`); err != nil {
		t.Fatal(err)
	}
	dana := testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "user", "", "tg:dana"), ""))
	held := w.send(t, w.b, w.b, "sensitive", "", true)
	_, err := dana.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: held.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingFor: durationpb.New(time.Hour)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "step-up") {
		t.Fatalf("approve a step-up action for 1 hour: %v, want FailedPrecondition naming the step-up", err)
	}
	if _, err := dana.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: held.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
		t.Fatalf("approve it once: %v", err)
	}
}

// Issue 32: with --standing-grant-max 0 standing grants are off: asking
// for one is refused and approving once works.
func TestStandingGrantsOff(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, func(c *config.Config) { c.StandingGrantMax = 0 })
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO users (id) VALUES ('tg:dana')`); err != nil {
		t.Fatal(err)
	}
	dana := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "tg:dana"), ""))
	_, err := dana.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: "hold_none", Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingFor: durationpb.New(time.Hour)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "standing-grant-max 0") {
		t.Fatalf("standing request with standing grants off: %v, want FailedPrecondition", err)
	}
}

// Issue 32: an action the guard always holds (a package install) applies
// under a standing grant's ALLOW exactly the approved packages, and not
// once the grant is revoked.
func TestStandingGrantAppliesAnAlwaysHeldAction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.srv.Pool.Exec(ctxT(t), `WITH u AS (INSERT INTO users (id) VALUES ('tg:gina') RETURNING id)
		INSERT INTO user_roles (user_id, role) SELECT id, 'owner' FROM u`); err != nil {
		t.Fatal(err)
	}
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	gina := testserver.ClientsFor(f.srv.Conn(t, f.srv.Token(t, "user", "", "tg:gina"), ""))
	pkgs := map[string]any{"apt": []any{"curl"}}
	install := func() *guardv1.DecideResponse {
		t.Helper()
		res, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload(t, pkgs),
			Card: &guardv1.HoldCard{Title: "install curl", Question: "install?", DeliveryAction: "install_packages", DedupKey: "k-" + randHex()}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	held := install()
	if held.GetHoldId() == "" {
		t.Fatalf("install: %v, want a hold", held)
	}
	if held.GetDecision().GetApproverScope() == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL {
		t.Fatalf("the fixture's install was held at global scope, which never gets a standing grant: this test needs a group-scope install")
	}
	if _, err := gina.Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: held.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingFor: durationpb.New(time.Hour)}); err != nil {
		t.Fatalf("approve the install for 1 hour: %v", err)
	}
	again := install()
	if again.GetDecision().GetDecidedBy() != guard.ByStanding {
		t.Fatalf("the identical install: %v, want an ALLOW by standing grant", again.GetDecision())
	}
	if _, err := f.apply(t, again.GetDecisionId(), "self_mod.install_packages", map[string]any{"apt": []any{"curl", "evil-tools"}}, nil); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("apply other packages citing it: %v, want PermissionDenied", err)
	}
	if _, err := f.apply(t, again.GetDecisionId(), "self_mod.install_packages", pkgs, nil); err != nil {
		t.Fatalf("apply the approved packages citing it: %v", err)
	}
	third := install()
	if third.GetDecision().GetDecidedBy() != guard.ByStanding {
		t.Fatalf("the identical install again: %v", third.GetDecision())
	}
	if _, err := f.srv.Pool.Exec(ctxT(t), `UPDATE standing_grants SET revoked_at = now(), revoked_by = 'test'`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.apply(t, third.GetDecisionId(), "self_mod.install_packages", pkgs, nil); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("apply after the revocation: %v, want PermissionDenied", err)
	}
}
