package guard

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The engine's effects are the proto's words; anything else answers DENY.
func TestEffectProtoFailsClosed(t *testing.T) {
	for e, want := range map[Effect]guardv1.Effect{
		EffectAllow: guardv1.Effect_EFFECT_ALLOW,
		EffectHold:  guardv1.Effect_EFFECT_HOLD,
		EffectDeny:  guardv1.Effect_EFFECT_DENY,
		"":          guardv1.Effect_EFFECT_DENY,
		"ALLOW":     guardv1.Effect_EFFECT_DENY,
		"permit":    guardv1.Effect_EFFECT_DENY,
	} {
		if got := effectProto(e); got != want {
			t.Errorf("effectProto(%q) = %v, want %v", e, got, want)
		}
	}
}
