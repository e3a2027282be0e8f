package guard

import (
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// step is the write a verdict needs before it is answered.
type step int

const (
	// stepLog logs the decision (batched) and answers it.
	stepLog step = iota
	// stepPrior answers what an earlier request with the same id was told.
	stepPrior
	// stepCited answers a replay of a grant an earlier decision consumed
	// with that decision (its citation); nothing is written.
	stepCited
	// stepConsume consumes the grant and logs the ALLOW in one statement.
	stepConsume
	// stepHold creates the hold and logs the HOLD in one transaction.
	stepHold
	// stepNotOwned refuses a runner acting for a session it does not host.
	stepNotOwned
)

// verdict is what a reading decides: the decision, and what recording it
// takes. judge makes it without any I/O.
type verdict struct {
	Decision
	step  step
	prior *guardv1.DecideResponse // stepPrior
	// explanation answers a dry run; trace is the log row's (explain.go).
	explanation *guardv1.Explanation
	trace       []byte
	// cause: the facts could not be read, so nothing was decided (the
	// record step fails closed, or answers Unavailable to a replay).
	cause error
}

// judge is the pure part of a decision: from what was read to the verdict.
// err is the reading's failure, if any.
func judge(p *plan, r *reading, err error) verdict {
	if err != nil {
		return verdict{Decision: failClosed(), cause: err}
	}
	req, in, e := p.req, &p.req.Input, p.Entry()
	if r.prior != nil {
		var prior guardv1.DecideResponse
		if proto.Unmarshal(r.prior, &prior) != nil {
			return verdict{Decision: failClosed()}
		}
		return verdict{step: stepPrior, prior: &prior}
	}
	if p.badArgs {
		return verdict{Decision: failClosed()}
	}
	if req.RequireOwnedSession && !ownsSession(req, r.common) {
		return verdict{step: stepNotOwned}
	}
	v := verdict{Decision: evaluate(e, in, r.facts)}
	switch {
	case p.retryable() && req.RunnerID != "" && v.Effect != EffectDeny && consumedReplay(e, in, r.grant):
		// Idempotent per hold, not per runner: the session's runner (a
		// takeover one too) gets the consuming decision's answer while the
		// baseline still holds, and ApplyAction applies it once. Only
		// runners: an in-process caller acts on the ALLOW itself, so for it
		// a used grant stays a DENY.
		v.step = stepCited
		return v
	case in.Grant != "" && v.Effect == EffectHold:
		v.Decision = checkGrant(e, in, r.grant)
		if v.Effect == EffectAllow && !req.DryRun {
			v.step = stepConsume
		}
	case v.Effect == EffectHold && req.Card != nil && !req.DryRun:
		v.step = stepHold
	}
	v.trace = encodeTrace(e, in, r.facts)
	if req.DryRun {
		v.explanation = Explain(e, in, r.facts, v.Decision)
	}
	return v
}

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
	if d, ok := frozen(in, f); ok {
		return d
	}
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
