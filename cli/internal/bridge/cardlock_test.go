package bridge

import (
	"context"
	"log/slog"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// lockProbe is a chat that records, for each edit, whether the card lock
// was held while it was made.
type lockProbe struct {
	b      *Bridge
	locked []bool
}

func (p *lockProbe) Edit(_ context.Context, _ Card, _ string, _ []Button) error {
	free := p.b.cardMu.TryLock()
	if free {
		p.b.cardMu.Unlock()
	}
	p.locked = append(p.locked, !free)
	return nil
}
func (*lockProbe) Connect(context.Context) (string, error) { return "", nil }
func (*lockProbe) Receive(context.Context) error           { return nil }
func (*lockProbe) DMChat(h string) (string, bool)          { return h, true }
func (*lockProbe) Post(context.Context, string, string, []Button) (Card, error) {
	return Card{}, nil
}
func (*lockProbe) Answer(context.Context, Click, string, bool)     {}
func (*lockProbe) AskReason(context.Context, Click, *guardv1.Hold) {}
func (*lockProbe) Retryable(error) (bool, time.Duration)           { return false, 0 }
func (*lockProbe) NotReady() string                                { return "" }

// A note on a card (a quorum step, an awaited reason, a refused press) and
// the edit that closes it are made under one lock, and the note reads the
// open cards under it: a note racing the close can never land after it and
// give a resolved card its buttons back.
func TestCardNotesAndTheClosingEditShareOneLock(t *testing.T) {
	b, err := New(Defaults(t.TempDir(), ""), Spec{Namespace: "test", Title: "Test"}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := &lockProbe{b: b}
	b.SetChat(p)
	h := &guardv1.Hold{Id: "hold_1", Options: []*guardv1.HoldOption{{Label: "Approve", Value: "approve"}}}
	if err := b.st.update(func(s *State) { s.Cards["hold_1"] = []Card{{Chat: "1", Message: "2", Text: "card"}} }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b.noteOnCard(ctx, h, "a note", nil)
	if err := b.closeCard(ctx, &guardv1.WatchResponse{Hold: h, Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
		t.Fatal(err)
	}
	if len(p.locked) != 2 || !p.locked[0] || !p.locked[1] {
		t.Fatalf("edits under the card lock: %v, want [true true]", p.locked)
	}
	// After the close, a late note finds no open card and edits nothing.
	if b.noteOnCard(ctx, h, "late", nil) || len(p.locked) != 2 {
		t.Fatalf("a note after the close edited the card (%d edits)", len(p.locked))
	}
}

// A hold a later step-up rule marks (Spec.ConsoleURL) gets the console
// link first on its card; any other keeps its option buttons only.
func TestAStepUpHoldsCardLinksToTheConsole(t *testing.T) {
	spec := Spec{Namespace: "test", Title: "Test", ConsoleURL: func(h *guardv1.Hold) string {
		if h.GetApproverScope() == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL {
			return "https://console.example/holds/" + h.GetId()
		}
		return ""
	}}
	b, err := New(Defaults(t.TempDir(), ""), spec, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	opts := []*guardv1.HoldOption{{Label: "Approve", Value: "approve"}, {Label: "Reject", Value: "reject"}}
	global := b.cardButtons(&guardv1.Hold{Id: "hold_g", ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL, Options: opts})
	if len(global) != 3 || global[0].Label != ConfirmLabel || global[0].URL != "https://console.example/holds/hold_g" || global[0].Data != "" {
		t.Fatalf("a step-up hold's buttons %+v, want the console link first", global)
	}
	group := b.cardButtons(&guardv1.Hold{Id: "hold_s", ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP, Options: opts})
	if len(group) != 2 || group[0].URL != "" || group[1].Data != CallbackData("hold_s", 1) {
		t.Fatalf("a plain hold's buttons %+v", group)
	}
}
