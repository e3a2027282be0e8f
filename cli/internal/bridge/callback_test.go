package bridge

import (
	"slices"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestCallbackDataRoundTripsAndFitsTelegramsLimit(t *testing.T) {
	d := CallbackData("hold_0123456789abcdef0123", 12)
	if len(d) > 64 {
		t.Fatalf("callback data %q is %d bytes; Telegram allows 64", d, len(d))
	}
	id, i, ok := ParseCallbackData(d)
	if !ok || id != "hold_0123456789abcdef0123" || i != 12 {
		t.Fatalf("parsed %q %d %v", id, i, ok)
	}
	for _, bad := range []string{"", "x:1", "h:", "h:id", "h:id:-1", "h:id:x"} {
		if _, _, ok := ParseCallbackData(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A card goes to the delivered-to approver, every further approver a quorum
// hold was delivered to, and every named approver of an exclusive rule —
// Telegram users only, each once.
func TestRecipientsCoverEveryApproverAQuorumNeeds(t *testing.T) {
	h := &guardv1.Hold{
		DeliveredTo:     "telegram:1",
		AlsoDeliveredTo: []string{"telegram:2", "slack:x", "telegram:1"},
		ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{
			UserId: "telegram:3", AlsoUserIds: []string{"telegram:2", "telegram:4"}}}},
	}
	got := Recipients(h, "telegram")
	want := []string{"telegram:1", "telegram:2", "telegram:3", "telegram:4"}
	if !slices.Equal(got, want) {
		t.Fatalf("recipients %v, want %v", got, want)
	}
}
