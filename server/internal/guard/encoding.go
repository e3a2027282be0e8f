package guard

import (
	"encoding/json"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func effectProto(e Effect) guardv1.Effect {
	switch e {
	case EffectAllow:
		return guardv1.Effect_EFFECT_ALLOW
	case EffectHold:
		return guardv1.Effect_EFFECT_HOLD
	}
	return guardv1.Effect_EFFECT_DENY
}

// EffectString is the lower-case name of a proto effect ("" when unspecified).
func EffectString(e guardv1.Effect) string {
	switch e {
	case guardv1.Effect_EFFECT_ALLOW:
		return string(EffectAllow)
	case guardv1.Effect_EFFECT_HOLD:
		return string(EffectHold)
	case guardv1.Effect_EFFECT_DENY:
		return string(EffectDeny)
	}
	return ""
}

// actorJSON is the decision log's actor column (hand-built: it is on the
// hot path and the shape is fixed).
func actorJSON(a *guardv1.Actor) string {
	switch k := a.GetKind().(type) {
	case *guardv1.Actor_Host:
		return `{"host":{}}`
	case *guardv1.Actor_Agent:
		return `{"agent":{"agent_group_id":` + jsonString(k.Agent.GetAgentGroupId()) + `,"session_id":` + jsonString(k.Agent.GetSessionId()) + `}}`
	case *guardv1.Actor_Human:
		return `{"human":{"user_id":` + jsonString(k.Human.GetUserId()) + `}}`
	}
	return `{"system":{}}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
