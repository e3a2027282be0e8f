package slack

import (
	"context"
	"testing"

	"github.com/clawguard/clawguard/cli/internal/bridge"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 34: with --console-url, the card of a step-up hold links to the
// hold's console page first; a press on Approve is still refused by the
// server, and the hold stays pending.
func TestAStepUpHoldsCardLinksToTheConsoleAndAPressIsRefused(t *testing.T) {
	e, _ := a2aEnv(t)
	if _, err := guardv1.NewRegistryClient(e.Op).SetActionSettings(context.Background(),
		&guardv1.SetActionSettingsRequest{Action: "a2a.send", StepUp: true}); err != nil {
		t.Fatal(err)
	}
	e.console = "https://console.example"
	e.startBridge()
	hold := e.A2AHold("rotate the keys")
	card := e.card(dana, hold)
	if len(card.Buttons) == 0 || card.Buttons[0].Label != bridge.ConfirmLabel || card.Buttons[0].URL != "https://console.example/holds/"+hold {
		t.Fatalf("the step-up card's buttons %+v, want the console link first", card.Buttons)
	}
	e.sl.press(dana, card, "Approve")
	e.edited(card, "step-up")
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("after a press on a step-up hold it is %s, want pending", st)
	}
}
