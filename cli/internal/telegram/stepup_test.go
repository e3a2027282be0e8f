package telegram

import (
	"context"
	"strings"
	"testing"

	"github.com/clawguard/clawguard/cli/internal/bridge"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 34: with --console-url, the card of a step-up hold links to the
// hold's console page first; a tap on Approve is still refused by the
// server, and the hold stays pending.
func TestAStepUpHoldsCardLinksToTheConsoleAndATapIsRefused(t *testing.T) {
	e, _ := a2aEnv(t)
	if _, err := guardv1.NewRegistryClient(e.Op).SetActionSettings(context.Background(),
		&guardv1.SetActionSettingsRequest{Action: "a2a.send", StepUp: true}); err != nil {
		t.Fatal(err)
	}
	e.console = "https://console.example/"
	e.startBridge()
	hold := e.A2AHold("rotate the keys")
	card := e.card(danaID, hold)
	if len(card.Buttons) == 0 || card.Buttons[0].Text != bridge.ConfirmLabel || card.Buttons[0].URL != "https://console.example/holds/"+hold {
		t.Fatalf("the step-up card's buttons %+v, want the console link first", card.Buttons)
	}
	e.tg.tap(danaID, card, "Approve")
	e.Eventually(wait, "Dana's tap refused for the step-up", func() bool {
		e.tg.mu.Lock()
		defer e.tg.mu.Unlock()
		for _, a := range e.tg.answers {
			if strings.Contains(a, "step-up") {
				return true
			}
		}
		return false
	})
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("after a tap on a step-up hold it is %s, want pending", st)
	}
}
