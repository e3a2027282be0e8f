package resources_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 34: a hold of a catalog action marked for step-up cannot be approved
// by a tap in chat (a bridge asserting the approver), only by the approver
// freshly proven: their own token here (the console's fresh sign-in is
// tested with the console). Rejecting from chat still works.
func TestAStepUpHoldIsNotApprovedFromChat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFreezeWorld(t)
	exec(t, w.a, `INSERT INTO users (id) VALUES ('telegram:dana')`)
	must[*guardv1.SetPolicyResponse](t)(w.op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: w.research, ToGroup: w.ops, ApproverUserId: "telegram:dana"}))
	entry := must[*guardv1.SetActionSettingsResponse](t)(w.op.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send", StepUp: true})).GetEntry()
	if !entry.GetStepUp() {
		t.Fatalf("entry %v, want step_up", entry)
	}
	listed := must[*guardv1.ListCatalogResponse](t)(w.op.Registry.ListCatalog(ctx, &guardv1.ListCatalogRequest{})).GetEntries()
	for _, e := range listed {
		if e.GetAction() == "a2a.send" && !e.GetStepUp() {
			t.Errorf("catalog list: a2a.send without step_up")
		}
	}
	hold := func(text string) string {
		payload, _ := structpb.NewStruct(map[string]any{"to": w.ops, "text": text})
		r, err := w.agentA.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": w.ops}, Payload: payload,
			Card: &guardv1.HoldCard{Title: "research → ops: " + text, Question: "May research message ops?", DeliveryAction: "send_message"}})
		if err != nil || r.GetHoldId() == "" {
			t.Fatalf("hold: %v %v", r, err)
		}
		return r.GetHoldId()
	}
	bridge := testserver.ClientsFor(w.a.Conn(t, w.a.BridgeToken(t, "telegram"), ""))
	dana := testserver.ClientsFor(w.a.Conn(t, w.a.Token(t, "user", "", "telegram:dana"), ""))

	first := hold("one")
	_, err := bridge.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: first, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:dana"})
	wantCode(t, err, codes.FailedPrecondition, "")
	if err == nil || !strings.Contains(err.Error(), "step-up") {
		t.Fatalf("a chat tap on a step-up hold: %v", err)
	}
	if h := must[*guardv1.ResolveResponse](t)(dana.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: first, Outcome: guardv1.Outcome_OUTCOME_APPROVE})).GetHold(); h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("dana with her own token: %v", h.GetStatus())
	}
	second := hold("two")
	if h := must[*guardv1.ResolveResponse](t)(bridge.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: second, Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: "telegram:dana"})).GetHold(); h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_REJECTED {
		t.Fatalf("a reject from chat: %v", h.GetStatus())
	}
	// Unmarked again, the chat tap approves.
	must[*guardv1.SetActionSettingsResponse](t)(w.op.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send"}))
	third := hold("three")
	if h := must[*guardv1.ResolveResponse](t)(bridge.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: third, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:dana"})).GetHold(); h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("a chat tap once step-up is off: %v", h.GetStatus())
	}
}
