package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 41 item 8: the bridges approve once. A bridge token asking for a
// standing grant — "for 24 hours", "for this session" — is refused, so a
// leaked one cannot pre-approve a day of identical requests; the approver's
// own token still can.
func TestABridgeTokenCannotGiveAStandingGrant(t *testing.T) {
	w := newSecretsWorld(t)
	ctx := context.Background()
	payload, _ := structpb.NewStruct(map[string]any{"apt": []any{"jq"}})
	d, err := w.agentA.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload,
		Card: &guardv1.HoldCard{Title: "Install", DeliveryAction: "install_packages"}})
	if err != nil || d.GetHoldId() == "" {
		t.Fatalf("install_packages: %v %v, want a hold", d, err)
	}
	for name, req := range map[string]*guardv1.ResolveRequest{
		"for 24 hours":     {StandingFor: durationpb.New(24 * time.Hour)},
		"for this session": {StandingSession: true},
	} {
		req.Id, req.Outcome, req.AsUser = d.GetHoldId(), guardv1.Outcome_OUTCOME_APPROVE, "telegram:olivia"
		_, err := w.bridge.Approvals.Resolve(ctx, req)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "approves once") {
			t.Errorf("bridge approves %s: %v, want FailedPrecondition (a tap approves once)", name, err)
		}
	}
	g, err := w.owner.Approvals.Get(ctx, &guardv1.GetRequest{Id: d.GetHoldId()})
	if err != nil || g.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("after the refused taps the hold is %v (%v), want it pending", g.GetHold().GetStatus(), err)
	}
	if r, err := w.owner.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: d.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE,
		StandingFor: durationpb.New(time.Hour)}); err != nil || r.GetStandingGrant() == nil {
		t.Fatalf("the owner's own token: %v %v, want a standing grant", r, err)
	}
}
