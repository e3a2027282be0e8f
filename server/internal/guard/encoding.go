package guard

import (
	"encoding/json"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// effectProto is the proto of an engine effect (the same word); anything
// else is DENY (fail closed).
func effectProto(e Effect) guardv1.Effect {
	if p, err := enumword.Parse[guardv1.Effect](string(e)); err == nil && p != guardv1.Effect_EFFECT_UNSPECIFIED {
		return p
	}
	return guardv1.Effect_EFFECT_DENY
}

// actorJSON is the decision log's actor column (hand-built: it is on the
// hot path and the shape is fixed).
// storedActor is the actor column of a log row: NULL (nil) when the row's
// kind and group and session columns imply it — an agent, the host, the
// system — else the JSON of actorJSON. Readers rebuild the implied ones.
func storedActor(a *guardv1.Actor) *string {
	if _, human := a.GetKind().(*guardv1.Actor_Human); !human {
		return nil
	}
	s := actorJSON(a)
	return &s
}

// LoggedActorSQL is a logged decision's actor: as stored, or rebuilt where
// storedActor left it NULL, from the row's kind and its group and session
// columns, in the shape actorJSON writes. Readers of the log select it.
const LoggedActorSQL = `COALESCE(actor, CASE actor_kind
	WHEN 'agent' THEN jsonb_build_object('agent', jsonb_build_object('agent_group_id', COALESCE(agent_group_id, ''), 'session_id', COALESCE(session_id, '')))
	WHEN 'host' THEN '{"host":{}}'::jsonb
	ELSE '{"system":{}}'::jsonb END)`

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
