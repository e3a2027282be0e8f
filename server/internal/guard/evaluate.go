package guard

import (
	"fmt"
	"maps"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
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
	return applyMode(d, f)
}

// modeFact is the fact every entry reads: its action's enforcement mode.
const modeFact = "action_mode"

// applyMode relaxes a gate's HOLD or DENY when the gate is in audit or warn
// mode, keeping what enforce would have answered in Would. A relaxed hold
// allows; a relaxed gate deny answers what the rest of its baseline says
// (Relaxed). A global-scope hold is never relaxed (its owner-only approval
// is the D1 protection), nor is a deny that is not marked as a gate
// (structural checks, D2-D4).
func applyMode(d Decision, f Facts) Decision {
	modal := (d.Effect == EffectHold && d.Scope != guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL) ||
		(d.Effect == EffectDeny && d.Gate)
	if !modal {
		return d
	}
	mode := d.Mode
	if mode == "" {
		mode = f.Str(modeFact)
	}
	if mode != ModeAudit && mode != ModeWarn {
		return d
	}
	would := d
	out := Decision{Effect: EffectAllow}
	if d.Effect == EffectDeny && d.Relaxed != nil && wellFormed(*d.Relaxed) {
		out = *d.Relaxed
	}
	if out.Effect == EffectAllow {
		out.Reason = fmt.Sprintf("%s mode: enforce would %s (%s)", mode, verb(d.Effect), d.Reason)
		out.DecidedBy = ByMode
	} else {
		out.DecidedBy = ByBaseline
	}
	out.Mode, out.Would = mode, &would
	return out
}

func verb(e Effect) string {
	if e == EffectHold {
		return "hold"
	}
	return "deny"
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
	// ... and names the resource it was decided on.
	if len(g.Resource) > 0 && !maps.Equal(g.Resource, nonNilResource(in.Resource)) {
		return invalid
	}
	if e.GrantMatches != nil && !e.GrantMatches(g, in) {
		return invalid
	}
	return Decision{Effect: EffectAllow, Reason: grantReason(in.Grant), DecidedBy: ByGrant}
}

func grantReason(grant string) string { return fmt.Sprintf("hold satisfied by approval %s", grant) }

// consumedReplay reports whether in replays a hold whose grant an earlier
// decision consumed, bound exactly as the consuming replay was (kind,
// group, action, session, resource, domain binding).
func consumedReplay(e *Entry, in *Input, g *GrantRow) bool {
	if g == nil || g.ConsumedBy == "" || g.Status != "approved" || !g.Consumed {
		return false
	}
	live := *g
	live.Consumed = false
	return checkGrant(e, in, &live).Effect == EffectAllow
}

func nonNilResource(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
