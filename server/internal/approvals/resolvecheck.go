package approvals

import (
	"time"
	"unicode/utf8"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
)

// The rules of a click, with no I/O: checkClick judges the request alone,
// checkResolution what was read under the hold's lock (readResolution),
// captureHolds another approver's reason capture. Each refusal is a fault
// that says why and, where there is one, what would change it.

// MaxReasonChars bounds a reject reason (it is relayed to the requester).
const MaxReasonChars = 280

// ChoiceRejectWithReason is the default card's "Reject with reason…" option.
const ChoiceRejectWithReason = "reject_with_reason"

// checkClick refuses a click that no hold could take, before anything is
// read: a standing grant that may not be asked (standingMax: the server's
// --standing-grant-max), an outcome that is not a click's, a reason on an
// approval or past MaxReasonChars, no clicker.
func checkClick(r Resolution, standingMax time.Duration) error {
	if err := checkStandingRequest(r, standingMax); err != nil {
		return err
	}
	switch r.Outcome {
	case guardv1.Outcome_OUTCOME_APPROVE:
		if r.Reason != "" {
			return fault.New(fault.Invalid, "reason: only a reject carries a reason")
		}
	case guardv1.Outcome_OUTCOME_REJECT:
	default:
		return fault.New(fault.Invalid, "outcome: want APPROVE or REJECT")
	}
	if n := utf8.RuneCountInString(r.Reason); n > MaxReasonChars {
		return fault.New(fault.Invalid, "reason: %d characters, at most %d", n, MaxReasonChars)
	}
	if r.Clicker == "" {
		return fault.New(fault.Invalid, "clicker: a resolving user is required")
	}
	return nil
}

// resolveStep is the transition a click makes.
type resolveStep int

const (
	// stepResolve resolves the hold: the conditional UPDATE, its push and
	// its event (resolveTx).
	stepResolve resolveStep = iota
	// stepArmReason marks the hold as awaiting the clicker's reject reason.
	stepArmReason
	// stepCountApproval records one approval of several and judges the
	// quorum; the hold is resolved when it is met.
	stepCountApproval
)

// resolveVerdict is what checkResolution decides a click does.
type resolveVerdict struct {
	step resolveStep
	// captor is another approver whose reason capture the hold awaits: the
	// click is refused while they may still resolve it (captureHolds, on
	// their roles as they are now).
	captor string
}

// checkResolution is the click rule of every hold, in order: the clicker's
// rule (mayResolve, D1 included), pending, expiry, step-up, freeze, the
// standing grant asked, the choice; then what the click does. now is the
// time expiry is judged at.
func checkResolution(r Resolution, rd resolveReading, now time.Time) (resolveVerdict, error) {
	cur := rd.hold
	if !MayResolveWithRoles(cur.ApproverRule, cur.ApproverScope, r.Clicker, rd.roles) {
		return resolveVerdict{}, fault.New(fault.Denied, "%s may not resolve hold %s: %s", r.Clicker, r.HoldID, WhyNotResolver(cur, rd.roles))
	}
	if cur.Status != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		return resolveVerdict{}, fault.New(fault.Precondition, "hold %s already resolved (%s)", r.HoldID, enumword.String(cur.Status))
	}
	if cur.ExpiresAt != nil && !cur.ExpiresAt.AsTime().After(now) {
		return resolveVerdict{}, fault.New(fault.Precondition, "hold %s has expired", r.HoldID)
	}
	// cur.StepUp is read with the locking read (holdColumns'
	// step_up_marked and the kind's rule: holdRow.proto).
	if r.approves() && !r.SteppedUp && cur.GetStepUp() {
		return resolveVerdict{}, fault.New(fault.Precondition, "hold %s needs a step-up: a tap in chat cannot approve it; approve it in the console after signing in again (or with your own token, ncl)", r.HoldID)
	}
	if r.approves() && rd.frozenBy != "" {
		// A frozen scope's holds stay pending: approved, their replay
		// would only be denied (the freeze is always enforced).
		return resolveVerdict{}, fault.New(fault.Precondition, "hold %s is of a frozen agent (frozen by %s): it stays pending until the freeze is lifted", r.HoldID, rd.frozenBy)
	}
	if r.Standing.Wanted() {
		if why := standingRefusal(cur, r.Standing); why != "" {
			return resolveVerdict{}, fault.New(fault.Precondition, "hold %s cannot be approved as a standing grant: %s", r.HoldID, why)
		}
	}
	if r.Choice != "" && !hasOption(cur, r.Choice) {
		return resolveVerdict{}, fault.New(fault.Invalid, "choice: %q is not an option of hold %s", r.Choice, r.HoldID)
	}
	var v resolveVerdict
	if cur.AwaitingReasonFrom != "" && cur.AwaitingReasonFrom != r.Clicker {
		v.captor = cur.AwaitingReasonFrom
	}
	switch {
	case armsReasonCapture(cur, r):
		v.step = stepArmReason
	case r.approves() && cur.ApprovalsRequired > 1:
		v.step = stepCountApproval
	}
	return v, nil
}

// captureHolds refuses a click while the hold awaits a reject reason from
// captor and captor may still resolve it (a role revoked since ends the
// capture).
func captureHolds(cur *guardv1.Hold, captor string, roles Roles) error {
	if MayResolveWithRoles(cur.ApproverRule, cur.ApproverScope, captor, roles) {
		return fault.New(fault.Precondition, "hold %s awaits a reject reason from %s", cur.Id, captor)
	}
	return nil
}

// armsReasonCapture: "Reject with reason…" without the reason yet, on a hold
// with a session to tell (a sessionless hold has nobody to relay a reason
// to, so it is rejected at once, as in the seed).
func armsReasonCapture(cur *guardv1.Hold, r Resolution) bool {
	return r.Outcome == guardv1.Outcome_OUTCOME_REJECT && r.Choice == ChoiceRejectWithReason &&
		r.Reason == "" && cur.SessionId != ""
}

func hasOption(h *guardv1.Hold, v string) bool {
	for _, o := range h.Options {
		if o.GetValue() == v {
			return true
		}
	}
	return false
}
