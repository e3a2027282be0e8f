package resources_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 32: a message policy escalates its held messages to a user named by
// display name and to a group's admins; unknown names are refused; the
// escalated approver may approve only once the escalation happened.
func TestPolicyEscalationThroughTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFreezeWorld(t)
	exec(t, w.a, `INSERT INTO users (id, display_name) VALUES ('telegram:dana', 'Dana'), ('telegram:erin', 'Erin'), ('telegram:olga', '')`)
	exec(t, w.a, `INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:olga', 'admin', $1)`, w.ops)
	minutes := func(n int) *durationpb.Duration { return durationpb.New(time.Duration(n) * time.Minute) }

	// Unknown or incomplete plans are refused, with the field named.
	for _, bad := range []*guardv1.SetPolicyRequest{
		{EscalateAfter: minutes(30), EscalateTo: []string{"Nobody"}},
		{EscalateAfter: minutes(30), EscalateTo: []string{"group:nope"}},
		{EscalateAfter: minutes(30)},
		{EscalateTo: []string{"Erin"}},
		{RemindAfter: minutes(40), EscalateAfter: minutes(30), EscalateTo: []string{"Erin"}},
	} {
		bad.FromGroup, bad.ToGroup, bad.ApproverUserId = w.research, w.ops, "telegram:dana"
		_, err := w.op.Registry.SetPolicy(ctx, bad)
		wantCode(t, err, codes.InvalidArgument, "")
	}
	_, err := w.op.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send", EscalateAfter: minutes(5), EscalateTo: []string{"Nobody"}})
	wantCode(t, err, codes.InvalidArgument, "escalate_to")

	p := must[*guardv1.SetPolicyResponse](t)(w.op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: w.research, ToGroup: w.ops, ApproverUserId: "telegram:dana",
		RemindAfter: minutes(10), EscalateAfter: minutes(30), EscalateTo: []string{"Erin", "group:ops"}})).GetPolicy()
	if want := []string{"telegram:erin", "group:" + w.ops}; !slices.Equal(p.GetEscalateTo(), want) || p.GetRemindAfter().AsDuration() != 10*time.Minute || p.GetEscalateAfter().AsDuration() != 30*time.Minute {
		t.Fatalf("policy %v, want escalate_to %v", p, want)
	}
	listed := must[*guardv1.ListPoliciesResponse](t)(w.op.Registry.ListPolicies(ctx, &guardv1.ListPoliciesRequest{})).GetPolicies()
	if len(listed) != 1 || !slices.Equal(listed[0].GetEscalateTo(), p.GetEscalateTo()) {
		t.Fatalf("listed %v", listed)
	}

	payload, _ := structpb.NewStruct(map[string]any{"to": w.ops, "text": "hello"})
	r, err := w.agentA.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": w.ops}, Payload: payload,
		Card: &guardv1.HoldCard{Title: "research → ops: hello", DeliveryAction: "send_message"}})
	if err != nil || r.GetHoldId() == "" {
		t.Fatalf("hold: %v %v", r, err)
	}
	erin := testserver.ClientsFor(w.a.Conn(t, w.a.Token(t, "user", "", "telegram:erin"), ""))
	_, err = erin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: r.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE})
	wantCode(t, err, codes.PermissionDenied, "")

	// Half an hour passes for the database; the other replica sweeps.
	exec(t, w.a, `UPDATE holds SET remind_at = now() - interval '1 second', escalate_at = now() - interval '1 second' WHERE id = $1`, r.GetHoldId())
	// The replicas' own sweeps run meanwhile: whichever takes a step, each
	// is taken once.
	if _, err := w.b.Deps().Approvals.EscalateDue(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	testserver.Eventually(t, 10*time.Second, "the reminder and the escalation taken", func() bool {
		var n int
		_ = w.a.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = $1 AND reminded_at IS NOT NULL AND escalated_at IS NOT NULL`, r.GetHoldId()).Scan(&n)
		return n == 1
	})
	var steps int
	if err := w.a.Pool.QueryRow(ctx, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type IN ('reminded', 'escalated')`, r.GetHoldId()).Scan(&steps); err != nil || steps != 2 {
		t.Fatalf("%d reminder and escalation events (%v), want one of each", steps, err)
	}
	h := must[*guardv1.GetResponse](t)(w.op.Approvals.Get(ctx, &guardv1.GetRequest{Id: r.GetHoldId()})).GetHold()
	if want := []string{"telegram:erin", "telegram:olga"}; !slices.Equal(h.GetEscalatedTo(), want) || h.GetRemindedAt() == nil || h.GetEscalatedAt() == nil {
		t.Fatalf("escalation state %v at %v reminded %v, want to %v", h.GetEscalatedTo(), h.GetEscalatedAt(), h.GetRemindedAt(), want)
	}
	if h := must[*guardv1.ResolveResponse](t)(erin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: r.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE})).GetHold(); h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("erin after the escalation: %v", h.GetStatus())
	}
}
