package approvals_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 29: every approval a quorum counts comes from someone eligible when
// the quorum is judged. A role revoked (or a policy that stops naming an
// approver) while the hold is partial takes that approval out of the
// count; the row stays on record, marked.

func revokeScoped(t *testing.T, srv *testserver.Server, user, group string) {
	t.Helper()
	if _, err := srv.Operator(t).Registry.RevokeRole(context.Background(), &guardv1.RevokeRoleRequest{UserId: user,
		Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: group}); err != nil {
		t.Fatal(err)
	}
}

func grantScoped(t *testing.T, srv *testserver.Server, user, group string) {
	t.Helper()
	if _, err := srv.Operator(t).Registry.GrantRole(context.Background(), &guardv1.GrantRoleRequest{UserId: user,
		Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: group}); err != nil {
		t.Fatal(err)
	}
}

// getAs reads a hold as the operator (ncl approvals get).
func getAs(t *testing.T, srv *testserver.Server, id string) *guardv1.Hold {
	t.Helper()
	resp, err := srv.Operator(t).Approvals.Get(context.Background(), &guardv1.GetRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetHold()
}

// ineligibleOf lists the approvers a hold marks as not counting.
func ineligibleOf(h *guardv1.Hold) map[string]bool {
	out := map[string]bool{}
	for _, a := range h.GetApprovals() {
		if a.GetIneligible() {
			out[a.GetUserId()] = true
		}
	}
	return out
}

func partialRemaining(t *testing.T, srv *testserver.Server, id string) []int {
	t.Helper()
	rows, err := srv.Pool.Query(context.Background(), `SELECT approvals_remaining FROM hold_events
		WHERE hold_id = $1 AND type = 'approved_partial' ORDER BY cursor`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// The reported attack: 2 approvals needed; the scoped admin approves, is
// revoked (her next click refused), the global admin approves once: the
// hold stays partial (1 of 2), says so, and needs a third eligible
// approver. Once approved, the record says who counted.
func TestQuorumDoesNotCountARevokedApprover(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, func(c *config.Config) { c.GroupHoldApprovals = 2 })
	seed(t, srv)
	var mu sync.Mutex
	ran := 0
	srv.Deps().Approvals.OnApproved("test_qrev", func(context.Context, *guardv1.Hold) error {
		mu.Lock()
		defer mu.Unlock()
		ran++
		return nil
	})
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_qrev", SessionID: "sess-1", Scope: group, Title: "t"})
	if _, err := approve(t, srv, h.Id, scopedAdmin); err != nil {
		t.Fatal(err)
	}
	revokeScoped(t, srv, scopedAdmin, "ag-1")
	if _, err := approve(t, srv, h.Id, scopedAdmin); code(err) != codes.PermissionDenied {
		t.Fatalf("revoked admin's next click: %v, want PermissionDenied", err)
	}
	if got := getAs(t, srv, h.Id); !ineligibleOf(got)[scopedAdmin] {
		t.Fatalf("get after the revocation does not mark %s: %v", scopedAdmin, got.GetApprovals())
	}
	got, err := approve(t, srv, h.Id, globalAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING || pendingStatus(t, srv, h.Id) != "pending" {
		t.Fatalf("approved by %s plus a revoked admin's stale approval: %v", globalAdmin, got)
	}
	if inel := ineligibleOf(got); len(got.GetApprovals()) != 2 || !inel[scopedAdmin] || inel[globalAdmin] {
		t.Fatalf("click's answer: approvals %v, want %s counted and %s marked", got.GetApprovals(), globalAdmin, scopedAdmin)
	}
	if r := partialRemaining(t, srv, h.Id); len(r) != 2 || r[0] != 1 || r[1] != 1 {
		t.Fatalf("approved_partial remaining %v, want [1 1] (one eligible approval of two each time)", r)
	}
	got, err = approve(t, srv, h.Id, owner)
	if err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("third approver: %v %v", got, err)
	}
	// The approved record keeps the judgment the quorum was met with, even
	// after the revoked admin's role comes back.
	grantScoped(t, srv, scopedAdmin, "ag-1")
	if inel := ineligibleOf(getAs(t, srv, h.Id)); len(inel) != 1 || !inel[scopedAdmin] {
		t.Fatalf("approved hold marks %v, want only %s", inel, scopedAdmin)
	}
	var counted []bool
	rows, err := srv.Pool.Query(context.Background(), `SELECT counted FROM hold_approvals WHERE hold_id = $1 ORDER BY approved_at`, h.Id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c bool
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		counted = append(counted, c)
	}
	rows.Close()
	if len(counted) != 3 || counted[0] || !counted[1] || !counted[2] {
		t.Fatalf("stored counted flags %v, want [false true true]", counted)
	}
	testserver.Eventually(t, 10*time.Second, "the approved handler ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ran == 1
	})
}

// Revoked then granted back while the hold is partial: the approval counts
// again, and the approver's repeated click (recorded once) completes the
// quorum it now meets. Other spellings of an approver are nobody.
func TestQuorumRegrantedApproverCountsAgain(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, func(c *config.Config) { c.GroupHoldApprovals = 2 })
	seed(t, srv)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_qre", SessionID: "sess-1", Scope: group, Title: "t"})
	if _, err := approve(t, srv, h.Id, scopedAdmin); err != nil {
		t.Fatal(err)
	}
	op := srv.Operator(t)
	for _, spelling := range []string{"Slack:scoped-admin", "slack:Scoped-Admin", "slack:scoped-admin.", "slack::scoped-admin", "slack:scoped-admin/"} {
		_, err := op.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.Id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: spelling})
		if code(err) != codes.PermissionDenied {
			t.Fatalf("approval as %q: %v, want PermissionDenied", spelling, err)
		}
	}
	revokeScoped(t, srv, scopedAdmin, "ag-1")
	if got, err := approve(t, srv, h.Id, globalAdmin); err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("global admin's approval with the scoped admin revoked: %v %v, want still pending", got, err)
	}
	grantScoped(t, srv, scopedAdmin, "ag-1")
	if inel := ineligibleOf(getAs(t, srv, h.Id)); len(inel) != 0 {
		t.Fatalf("after the role came back, marked %v, want none", inel)
	}
	got, err := approve(t, srv, h.Id, scopedAdmin)
	if err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("re-granted approver's click: %v %v, want the quorum met", got, err)
	}
	if n := len(got.GetApprovals()); n != 2 || len(ineligibleOf(got)) != 0 {
		t.Fatalf("approvals %v, want two, both counted", got.GetApprovals())
	}
}

// D1 judged now: a global admin demoted to a scoped admin of the anchor
// group no longer counts toward a global-scope hold.
func TestQuorumGlobalHoldDropsADemotedApprover(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, globalNeeds(2))
	seed(t, srv)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_qd1", SessionID: "sess-1", Scope: global, Title: "t"})
	if _, err := approve(t, srv, h.Id, globalAdmin); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := srv.Operator(t)
	if _, err := op.Registry.RevokeRole(ctx, &guardv1.RevokeRoleRequest{UserId: globalAdmin, Role: guardv1.Role_ROLE_ADMIN,
		Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatal(err)
	}
	grantScoped(t, srv, globalAdmin, "ag-1")
	got, err := approve(t, srv, h.Id, owner)
	if err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING || !ineligibleOf(got)[globalAdmin] {
		t.Fatalf("owner's approval with the other approver demoted under D1: %v %v, want still pending", got, err)
	}
}

// A revocation in flight when the completing click judges the quorum: the
// judgment waits for it (the approvers' role rows are locked) and sees the
// revocation, so the hold stays partial.
func TestQuorumJudgmentWaitsForARevocationInFlight(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, func(c *config.Config) { c.GroupHoldApprovals = 2 })
	seed(t, srv)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_qlock", SessionID: "sess-1", Scope: group, Title: "t"})
	if _, err := approve(t, srv, h.Id, scopedAdmin); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	revoke, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer revoke.Rollback(ctx)
	var revoker int
	if err := revoke.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&revoker); err != nil {
		t.Fatal(err)
	}
	if _, err := revoke.Exec(ctx, `DELETE FROM user_roles WHERE user_id = $1 AND agent_group_id = 'ag-1'`, scopedAdmin); err != nil {
		t.Fatal(err)
	}
	type result struct {
		h   *guardv1.Hold
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := approve(t, srv, h.Id, globalAdmin)
		done <- result{h, err}
	}()
	testserver.Eventually(t, 10*time.Second, "the completing click waits on the revocation's lock", func() bool {
		var n int
		err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, revoker).Scan(&n)
		return err == nil && n > 0
	})
	if err := revoke.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING || !ineligibleOf(r.h)[scopedAdmin] {
		t.Fatalf("click racing the revocation: %v %v, want still pending with %s not counted", r.h, r.err, scopedAdmin)
	}
}

// a2aHold is the agent of ag-1 messaging ag-2, held by the message policy.
func a2aHold(t *testing.T, srv *testserver.Server) string {
	t.Helper()
	payload, _ := structpb.NewStruct(map[string]any{"to": "ag-2", "text": "hi"})
	resp, err := srv.Operator(t).Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "a2a.send",
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag-1", SessionId: "sess-1"}}},
		Resource: map[string]string{"to": "ag-2"}, Payload: payload,
		Card: &guardv1.HoldCard{Title: "ag-1 → ag-2", Question: "May ag-1 message ag-2?"}})
	if err != nil || resp.GetHoldId() == "" {
		t.Fatalf("a2a send: %v %v", resp, err)
	}
	return resp.GetHoldId()
}

func setPolicy(t *testing.T, srv *testserver.Server, approver string, also []string, n int32) {
	t.Helper()
	if _, err := srv.Operator(t).Registry.SetPolicy(context.Background(), &guardv1.SetPolicyRequest{FromGroup: "ag-1", ToGroup: "ag-2",
		ApproverUserId: approver, AlsoApproverUserIds: also, Approvals: n}); err != nil {
		t.Fatal(err)
	}
}

// A message policy changed while its hold is partial: the approver it no
// longer names neither counts nor may click; the new one may. A single-
// approval hold follows the policy the same way.
func TestQuorumFollowsAPolicyChangedWhilePartial(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	exec(t, srv.Pool, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('ag-1', 'two', 'ag-2')`)
	setPolicy(t, srv, deliveree, []string{rando}, 2)
	id := a2aHold(t, srv)
	if _, err := approve(t, srv, id, deliveree); err != nil {
		t.Fatal(err)
	}
	// The policy now names rando and the owner; deliveree is out.
	setPolicy(t, srv, rando, []string{owner}, 2)
	if inel := ineligibleOf(getAs(t, srv, id)); !inel[deliveree] {
		t.Fatalf("after the policy change, %s is not marked: %v", deliveree, inel)
	}
	if _, err := approve(t, srv, id, deliveree); code(err) != codes.PermissionDenied {
		t.Fatalf("approver the policy no longer names: %v, want PermissionDenied", err)
	}
	got, err := approve(t, srv, id, rando)
	if err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("%s with %s's approval no longer counted: %v %v, want still pending", rando, deliveree, got, err)
	}
	if got, err = approve(t, srv, id, owner); err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("the newly named approver completes it: %v %v", got, err)
	}

	// One approval: the policy's approver replaced after arming "Reject
	// with reason…" — the capture ends with the approver's place.
	setPolicy(t, srv, deliveree, nil, 0)
	id = a2aHold(t, srv)
	if resp, err := userClients(t, srv, deliveree).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: id,
		Outcome: guardv1.Outcome_OUTCOME_REJECT, Choice: approvals.ChoiceRejectWithReason}); err != nil || resp.GetHold().GetAwaitingReasonFrom() != deliveree {
		t.Fatalf("arming the reason capture: %v %v", resp, err)
	}
	setPolicy(t, srv, otherAdmin, nil, 0)
	if _, err := approve(t, srv, id, deliveree); code(err) != codes.PermissionDenied {
		t.Fatalf("replaced approver on a single-approval hold: %v, want PermissionDenied", err)
	}
	if got, err := approve(t, srv, id, otherAdmin); err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("the policy's new approver: %v %v", got, err)
	}
}

// An approver who armed "Reject with reason…" and then lost their role
// no longer holds the other approvers off.
func TestARevokedApproversReasonCaptureHoldsNobodyOff(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_qcap", SessionID: "sess-1", Scope: group, Title: "t"})
	resp, err := userClients(t, srv, scopedAdmin).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.Id,
		Outcome: guardv1.Outcome_OUTCOME_REJECT, Choice: approvals.ChoiceRejectWithReason})
	if err != nil || resp.GetHold().GetAwaitingReasonFrom() != scopedAdmin {
		t.Fatalf("arming the reason capture: %v %v", resp, err)
	}
	if _, err := approve(t, srv, h.Id, globalAdmin); code(err) != codes.FailedPrecondition {
		t.Fatalf("another approver while the capture is armed: %v, want FailedPrecondition", err)
	}
	revokeScoped(t, srv, scopedAdmin, "ag-1")
	if got, err := approve(t, srv, h.Id, globalAdmin); err != nil || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("approval after the capturing approver's role was revoked: %v %v", got, err)
	}
}
