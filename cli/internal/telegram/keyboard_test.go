package telegram

import (
	"testing"

	"github.com/clawguard/clawguard/cli/internal/bridge"
)

// A console link is a URL button (a press of it sends nothing back); an
// option is a callback button; no buttons, no keyboard.
func TestKeyboardHasLinkAndOptionButtons(t *testing.T) {
	kb := keyboard([]bridge.Button{{Label: bridge.ConfirmLabel, URL: "https://console.example/holds/h"}, {Label: "Reject", Data: "h:h:1"}})
	if len(kb.InlineKeyboard) != 2 {
		t.Fatalf("rows %v", kb.InlineKeyboard)
	}
	link, opt := kb.InlineKeyboard[0][0], kb.InlineKeyboard[1][0]
	if link.URL != "https://console.example/holds/h" || link.CallbackData != "" || opt.CallbackData != "h:h:1" || opt.URL != "" {
		t.Fatalf("buttons %+v %+v", link, opt)
	}
	if keyboard(nil) != nil {
		t.Fatal("a keyboard without buttons")
	}
}
