// Package guard is the one decision function every privileged action
// consults: catalog lookup → baseline over facts read in one round trip →
// grant check and atomic consume → fail closed. It is a domain-free leaf:
// domain packages (commands, agents, a2a, selfmod, permissions) register
// their catalog entries at their edges; this package imports none of them.
//
// The pipeline of a decision, one way through (Engine.Decide): plan.go looks
// the catalog entry up once and builds the statement's arguments; source.go
// reads the facts through one interface, from the replica's copy (snapshot)
// or live; evaluate.go's judge decides with no I/O and names the write it
// needs; record.go makes that write, with the one outcome switch and the
// durability rules. decidetx.go is a decision made, logged and its grant
// consumed in a caller's transaction (ApplyAction's replay). batcher.go is
// the database batcher the pipeline sends through: the facts reads and log
// rows of concurrent decisions as one pgx batch, the caller sending its own
// batch when none is in flight. The catalog and its facts convention are
// catalog.go and facts.go (an entry whose facts read the request declares
// what it names, Entry.Names, which api checks against a user's read scope
// before a dry run); lookup.go declares facts as keyed reads of a mirrored
// table, whose SQL is derived from the declaration and which a snapshot
// answers from memory; facttables.go is the immutable, sharded copy of those
// tables. freeze.go is the freeze rule, in one place: the facts every entry
// reads, the denial, and FreezeCovers, the same rule in SQL for approvals
// and resources. hold.go makes a HOLD's hold in the decision's transaction;
// answer.go and declog.go log decisions and answer repeated request ids.
package guard

import (
	"fmt"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Effect is the guard's answer.
type Effect string

// The three answers.
const (
	EffectAllow Effect = "allow"
	EffectHold  Effect = "hold"
	EffectDeny  Effect = "deny"
)

// Who decided (Decision.DecidedBy and the decision log's decided_by).
const (
	ByNonCatalog   = "non-catalog"
	ByBaseline     = "baseline"
	ByPrecheck     = "precheck"
	ByGrant        = "grant"
	ByGuardFailure = "guard-failure"
	// ByMode: a gate in audit or warn mode let the action run.
	ByMode = "mode"
	// ByFreeze: the agent's scope (every agent, its group or its runner) is
	// frozen; always enforced.
	ByFreeze = "freeze"
	// ByStanding: a request that would be held matched a live standing
	// grant (an approval for a time or a session) exactly.
	ByStanding = "standing grant"
	// ByNoApprover: the gate held, but no hold could be made — nobody may
	// approve it, or too few to meet its quorum — so the agent was denied,
	// told why and what would fix it (Unheld).
	ByNoApprover = "no approver"
)

// Enforcement modes of a gate (action_settings.mode, a message policy's mode).
const (
	ModeEnforce = "enforce"
	ModeAudit   = "audit"
	ModeWarn    = "warn"
)

// Reasons the engine itself gives (tests match on them).
const (
	ReasonNonCatalog   = "non-catalog action"
	ReasonFailClosed   = "guard failure (failing closed)"
	ReasonInvalidGrant = "replay carried an invalid or mismatched grant"
)

// Decision is allow{reason} | hold{rule, scope, reason} | deny{reason}.
type Decision struct {
	Effect    Effect
	Reason    string
	Rule      *guardv1.ApproverRule // hold only
	Scope     guardv1.ApproverScope // hold only
	DecidedBy string

	// Gate marks a DENY that an operator may roll out in audit or warn mode
	// (a command allowlist). Every group-scope HOLD is such a gate; other
	// denials protect the system and are always enforced.
	Gate bool
	// Mode is the deciding gate's own mode when it has one (a message
	// policy's); "" = the catalog action's mode.
	Mode string
	// Approvals is the quorum a hold's own rule asks (a message policy's);
	// 0 = one, or the admin chain's settings.
	Approvals int
	// Relaxed is what a Gate deny answers when its gate is in audit or warn
	// mode (the rest of the baseline's checks); nil = allow.
	Relaxed *Decision
	// Would is what enforce would have answered, set when a mode relaxed
	// this decision.
	Would *Decision
}

// Allow is an allow decision.
func Allow(reason string) Decision { return Decision{Effect: EffectAllow, Reason: reason} }

// Deny is a deny decision.
func Deny(reason string) Decision { return Decision{Effect: EffectDeny, Reason: reason} }

// Denyf is a deny decision with a formatted reason.
func Denyf(format string, args ...any) Decision { return Deny(fmt.Sprintf(format, args...)) }

// Hold is a hold decision.
func Hold(rule *guardv1.ApproverRule, scope guardv1.ApproverScope, reason string) Decision {
	return Decision{Effect: EffectHold, Reason: reason, Rule: rule, Scope: scope}
}

// AdminsOfScope is the approver rule "the admin chain of group" ("" = global chain).
func AdminsOfScope(group, deliveredTo string) *guardv1.ApproverRule {
	return &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{
		AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: group, DeliveredTo: deliveredTo}}}
}

// Exclusive is the approver rule "only this user".
func Exclusive(user string) *guardv1.ApproverRule {
	return &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: user}}}
}

// Input is what a baseline sees.
type Input struct {
	// Action is the dotted catalog name, e.g. "a2a.send".
	Action string
	Actor  *guardv1.Actor
	// Resource holds domain references, e.g. {"to": "<group>"} for a2a.send.
	Resource map[string]string
	// Payload is the action's arguments (JSON-shaped: string, float64, bool,
	// nil, []any, map[string]any).
	Payload map[string]any
	// Grant is the id of an approved hold carried by a replay ("" = none).
	Grant string
}

// AgentGroup returns the actor's agent group when the actor is an agent.
func (in *Input) AgentGroup() (string, bool) {
	a := in.Actor.GetAgent()
	if a == nil {
		return "", false
	}
	return a.GetAgentGroupId(), true
}

// Session is the actor's session ("" unless the actor is an agent with one).
func (in *Input) Session() string { return in.Actor.GetAgent().GetSessionId() }

// ActorKind is "host", "agent", "human", "system" or "" (no actor).
func (in *Input) ActorKind() string { return ActorKind(in.Actor) }

// Arg is a payload value as a string ("" when absent or not a string).
func (in *Input) Arg(key string) string {
	s, _ := in.Payload[key].(string)
	return s
}

// HasArg reports whether a payload key is present and not empty/null.
func (in *Input) HasArg(key string) bool {
	v, ok := in.Payload[key]
	if !ok || v == nil {
		return false
	}
	if s, isStr := v.(string); isStr {
		return s != ""
	}
	return true
}

// ActorKind names an actor's kind.
func ActorKind(a *guardv1.Actor) string {
	switch a.GetKind().(type) {
	case *guardv1.Actor_Host:
		return "host"
	case *guardv1.Actor_Agent:
		return "agent"
	case *guardv1.Actor_Human:
		return "human"
	case *guardv1.Actor_System:
		return "system"
	}
	return ""
}

// GrantRow is the hold a grant names, as read with the decision's facts.
type GrantRow struct {
	ID           string
	Kind         string
	Status       string
	Consumed     bool
	AgentGroupID string
	// CatalogAction and SessionID are what the hold was decided for ("" when
	// it came from elsewhere); a grant replays only that action, from that session.
	CatalogAction string
	SessionID     string
	Payload       map[string]any
	// Resource is the decided resource ({} for holds made before it was
	// stored): a replay must name exactly this resource.
	Resource map[string]string
	// ConsumedBy is the decision that consumed the grant; Applied says its
	// citation has been applied (the mutation ran).
	ConsumedBy string
	Applied    bool
}

// Live reports whether the hold may still satisfy a replay: approved and
// not yet consumed.
func (g *GrantRow) Live() bool { return g != nil && g.Status == "approved" && !g.Consumed }
