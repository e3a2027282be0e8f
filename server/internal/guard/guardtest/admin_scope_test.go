package guardtest

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// The finding: an agent of group A asking `destinations add --target-group B`
// was held at group scope, so A's admin alone could let A message B. Any
// argument naming another group makes the hold global (SPEC, D1): A's
// scoped admin is refused, the owner may approve.
func TestDestinationToAnotherGroupIsHeldGlobal(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	owner := withOwner(w)
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-admin');
		INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:{A}-admin', 'admin', '{A}')`)
	agent := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), w.SA))

	hold := func(req *guardv1.AddDestinationRequest) string {
		t.Helper()
		_, err := agent.Registry.AddDestination(ctx, req)
		st := status.Convert(err)
		for _, d := range st.Details() {
			if p, ok := d.(*guardv1.ApprovalPending); ok && st.Code() == codes.FailedPrecondition {
				return p.GetHoldId()
			}
		}
		t.Fatalf("AddDestination %v: %v, want an approval pending", req, err)
		return ""
	}
	cross := hold(&guardv1.AddDestinationRequest{Name: "b", TargetGroup: w.B})
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + cross + `' AND approver_scope = 'global'`); n != 1 {
		t.Fatal("destinations.add naming another group was not held at global scope")
	}
	op := srv.Operator(t)
	_, err := op.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: cross, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: w.sub("telegram:{A}-admin")})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("A's scoped admin approving a hold that reaches B: %v, want PermissionDenied", err)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + cross + `' AND status = 'pending'`); n != 1 {
		t.Fatal("the refused click changed the hold")
	}
	if _, err := op.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: cross, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: owner}); err != nil {
		t.Fatalf("owner's approval: %v", err)
	}
	testserver.Eventually(t, 5*time.Second, "the approved destination to be added", func() bool {
		return w.count(`SELECT count(*) FROM agent_destinations WHERE agent_group_id = '{A}' AND target_agent_group_id = '{B}'`) == 1
	})

	// Naming only its own group stays a group-scope hold A's admin may approve.
	own := hold(&guardv1.AddDestinationRequest{Name: "self", TargetGroup: w.A})
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + own + `' AND approver_scope = 'group'`); n != 1 {
		t.Fatal("a destination within the caller's own group should stay group scope")
	}
	if _, err := op.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: own, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: w.sub("telegram:{A}-admin")}); err != nil {
		t.Fatalf("scoped admin approving an own-group hold: %v", err)
	}
}
