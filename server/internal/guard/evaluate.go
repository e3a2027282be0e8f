package guard

import (
	"fmt"
)

// evaluate is the pure part of Decide: catalog entry → precheck → baseline,
// failing closed on an error, a panic or a malformed decision. e == nil is
// a non-catalog action.
func evaluate(e *Entry, in *Input, f Facts) (d Decision) {
	if e == nil {
		return Decision{Effect: EffectAllow, Reason: ReasonNonCatalog, DecidedBy: ByNonCatalog}
	}
	defer func() {
		if r := recover(); r != nil {
			d = failClosed()
		}
	}()
	if e.Precheck != nil {
		if err := e.Precheck(in, f); err != nil {
			return Decision{Effect: EffectDeny, Reason: err.Error(), DecidedBy: ByPrecheck}
		}
	}
	d, err := e.Baseline(in, f)
	if err != nil || !wellFormed(d) {
		return failClosed()
	}
	d.DecidedBy = ByBaseline
	return d
}

func wellFormed(d Decision) bool {
	switch d.Effect {
	case EffectAllow, EffectDeny:
		return true
	case EffectHold:
		return d.Rule.GetKind() != nil && d.Scope != 0
	}
	return false
}

func failClosed() Decision {
	return Decision{Effect: EffectDeny, Reason: ReasonFailClosed, DecidedBy: ByGuardFailure}
}

// checkGrant decides a replay whose baseline held: the grant satisfies the
// hold only when the hold row is approved and unconsumed, of the entry's
// approval action, of the actor's group, and the domain binding passes.
// Consumption (the atomic part) is the caller's.
func checkGrant(e *Entry, in *Input, g *GrantRow) (d Decision) {
	invalid := Decision{Effect: EffectDeny, Reason: ReasonInvalidGrant, DecidedBy: ByGrant}
	defer func() {
		if r := recover(); r != nil {
			d = invalid
		}
	}()
	if e == nil || e.ApprovalAction == "" || !g.Live() || g.Kind != e.ApprovalAction {
		return invalid
	}
	if group, ok := in.AgentGroup(); ok && g.AgentGroupID != "" && g.AgentGroupID != group {
		return invalid
	}
	// A grant replays the action it was held for, from the session that asked.
	if g.CatalogAction != "" && g.CatalogAction != in.Action {
		return invalid
	}
	if s := in.Session(); s != "" && g.SessionID != "" && g.SessionID != s {
		return invalid
	}
	if e.GrantMatches != nil && !e.GrantMatches(g, in) {
		return invalid
	}
	return Decision{Effect: EffectAllow, Reason: fmt.Sprintf("hold satisfied by approval %s", in.Grant), DecidedBy: ByGrant}
}
