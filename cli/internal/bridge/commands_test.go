package bridge

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestFreezeCommandsAreReadStrictly(t *testing.T) {
	for _, tc := range []struct {
		text        string
		ok, bad     bool
		scope       guardv1.FreezeScope
		target, why string
	}{
		{text: "hello agent"},
		{text: "/start"},
		{text: "freeze all"}, // no slash: a message for the agent
		{text: "/freeze all", ok: true, scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL},
		{text: "/freeze@clawguard_bot all stop it now", ok: true, scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL, why: "stop it now"},
		{text: "/FREEZE Group research loop", ok: true, scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, target: "research", why: "loop"},
		{text: "/freeze runner host-3", ok: true, scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, target: "host-3"},
		{text: "/freeze", ok: true, bad: true},
		{text: "/freeze group", ok: true, bad: true},
		{text: "/freeze everything", ok: true, bad: true},
		{text: "/unfreeze all", ok: true, scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL},
		// An unfreeze with words after its target is refused: "/unfreeze
		// group research-2" mistyped as "research -2" must not lift research.
		{text: "/unfreeze group research -2", ok: true, bad: true},
		{text: "/freezes", ok: true},
	} {
		c, ok := parseChatCommand(tc.text)
		if ok != tc.ok || c.bad != tc.bad {
			t.Errorf("%q: ok=%v bad=%v, want ok=%v bad=%v", tc.text, ok, c.bad, tc.ok, tc.bad)
			continue
		}
		if ok && !c.bad && c.verb != "freezes" && (c.scope != tc.scope || c.target != tc.target || c.reason != tc.why) {
			t.Errorf("%q: %v %q %q, want %v %q %q", tc.text, c.scope, c.target, c.reason, tc.scope, tc.target, tc.why)
		}
	}
}
