package guardtest

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A message policy naming two approvers with --approvals 2: the held
// message needs both; nobody else (not even the owner) counts, and a grant
// exists only once both approved — then the replay is allowed once.
func TestPolicyQuorumNeedsEveryNamedApproval(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := newWorld(t, srv)
	owner := withOwner(w)
	dana, erin := w.sub("telegram:{A}-dana"), w.sub("telegram:{A}-erin")
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-dana'), ('telegram:{A}-erin');
		INSERT INTO user_dms (user_id, channel_type, address) VALUES ('telegram:{A}-dana', 'telegram', 'd'), ('telegram:{A}-erin', 'telegram', 'e');
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`)

	if _, err := op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: w.A, ToGroup: w.B,
		ApproverUserId: dana, AlsoApproverUserIds: []string{erin}, Approvals: 3}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("3 approvals from 2 named approvers: %v, want InvalidArgument", err)
	}
	pol, err := op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: w.A, ToGroup: w.B,
		ApproverUserId: dana, AlsoApproverUserIds: []string{erin, dana}, Approvals: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p := pol.GetPolicy(); p.GetApprovals() != 2 || len(p.GetAlsoApproverUserIds()) != 1 {
		t.Fatalf("policy %v: want 2 approvals and erin (deduplicated) as the other approver", p)
	}

	held, err := op.Guard.Decide(ctx, a2aSend(w, false))
	if err != nil {
		t.Fatal(err)
	}
	if held.GetDecision().GetEffect() != hold || held.GetHoldId() == "" {
		t.Fatalf("send: %v", held)
	}
	id := held.GetHoldId()
	resolve := func(user string) (*guardv1.Hold, error) {
		c := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", user), ""))
		r, err := c.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE})
		return r.GetHold(), err
	}
	if _, err := resolve(owner); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("owner on an exclusive policy hold: %v, want PermissionDenied", err)
	}
	h, err := resolve(dana)
	if err != nil || h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING || h.GetApprovalsRequired() != 2 {
		t.Fatalf("dana: %v %v", h, err)
	}
	replay := a2aSend(w, false)
	replay.Card, replay.Grant = nil, id
	if r, err := op.Guard.Decide(ctx, replay); err != nil || r.GetDecision().GetEffect() != deny {
		t.Fatalf("replay before the quorum: %v %v, want DENY (no grant yet)", r.GetDecision(), err)
	}
	if h, err = resolve(erin); err != nil || h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("erin: %v %v", h, err)
	}
	if r, err := op.Guard.Decide(ctx, replay); err != nil || r.GetDecision().GetEffect() != allow {
		t.Fatalf("replay after the quorum: %v %v, want ALLOW", r.GetDecision(), err)
	}
	if r, err := op.Guard.Decide(ctx, replay); err != nil || r.GetDecision().GetEffect() != deny {
		t.Fatalf("second replay: %v %v, want DENY (grant used)", r.GetDecision(), err)
	}
}
