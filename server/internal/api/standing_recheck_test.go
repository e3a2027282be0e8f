package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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

// Issue 41 item 7: a standing grant is re-checked where it is used. Marking
// its action --step-up afterwards, or raising the quorum past its
// approvers, holds the next identical request again; undone, it stands.
func TestAStandingGrantIsReCheckedAtUse(t *testing.T) {
	w := newSecretsWorld(t)
	ctx := context.Background()
	payload, _ := structpb.NewStruct(map[string]any{"apt": []any{"jq"}})
	ask := func() *guardv1.DecideResponse {
		t.Helper()
		d, err := w.agentA.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload,
			Card: &guardv1.HoldCard{Title: "Install", DeliveryAction: "install_packages"}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := ask()
	if _, err := w.owner.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: first.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE,
		StandingFor: durationpb.New(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	stands := func(want bool, when string) {
		t.Helper()
		d := ask()
		if got := d.GetDecision().GetDecidedBy() == "standing grant"; got != want {
			t.Fatalf("%s: %v (decided by %q), want standing=%v", when, d.GetDecision().GetEffect(), d.GetDecision().GetDecidedBy(), want)
		}
		if !want && d.GetDecision().GetEffect() == guardv1.Effect_EFFECT_ALLOW {
			t.Fatalf("%s: allowed without the grant: %v", when, d)
		}
	}
	stands(true, "the identical request")
	set := func(req *guardv1.SetActionSettingsRequest) {
		t.Helper()
		req.Action, req.Mode = "self_mod.install_packages", guardv1.EnforcementMode_ENFORCEMENT_MODE_ENFORCE
		if _, err := w.operator.Registry.SetActionSettings(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	set(&guardv1.SetActionSettingsRequest{StepUp: true})
	stands(false, "after the action was marked --step-up")
	set(&guardv1.SetActionSettingsRequest{})
	stands(true, "step-up unmarked")
	// A second owner makes a quorum of two reachable; the grant had one.
	if _, err := w.srv.Pool.Exec(ctx, `INSERT INTO users (id) VALUES ('telegram:pat'); INSERT INTO user_roles (user_id, role) VALUES ('telegram:pat', 'owner')`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.operator.Registry.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: "gA", HoldApprovals: proto.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	stands(false, "after the group's quorum was raised to two")
}
