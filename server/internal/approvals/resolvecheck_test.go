package approvals

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
)

// The click rules on their own, with no database: checkClick on the
// request, checkResolution on what readResolution read, captureHolds on a
// reason capture.

func TestCheckClick(t *testing.T) {
	approve, reject := guardv1.Outcome_OUTCOME_APPROVE, guardv1.Outcome_OUTCOME_REJECT
	cases := []struct {
		name string
		r    Resolution
		max  time.Duration
		kind fault.Kind // accepted: no refusal
		says string
	}{
		{"an approval", Resolution{Outcome: approve, Clicker: "u"}, time.Hour, accepted, ""},
		{"a reject with a reason", Resolution{Outcome: reject, Clicker: "u", Reason: "no"}, 0, accepted, ""},
		{"a reason on an approval", Resolution{Outcome: approve, Clicker: "u", Reason: "ok"}, 0, fault.Invalid, "only a reject"},
		{"no outcome", Resolution{Clicker: "u"}, 0, fault.Invalid, "want APPROVE or REJECT"},
		{"an expiry is no click", Resolution{Outcome: guardv1.Outcome_OUTCOME_EXPIRE, Clicker: "u"}, 0, fault.Invalid, "want APPROVE or REJECT"},
		{"a reason too long", Resolution{Outcome: reject, Clicker: "u", Reason: strings.Repeat("é", MaxReasonChars+1)}, 0, fault.Invalid, "at most 280"},
		{"a reason of the longest", Resolution{Outcome: reject, Clicker: "u", Reason: strings.Repeat("é", MaxReasonChars)}, 0, accepted, ""},
		{"nobody clicked", Resolution{Outcome: approve}, 0, fault.Invalid, "clicker"},
		{"a standing grant", Resolution{Outcome: approve, Clicker: "u", Standing: Standing{For: time.Hour}}, time.Hour, accepted, ""},
		{"a standing reject", Resolution{Outcome: reject, Clicker: "u", Standing: Standing{Session: true}}, time.Hour, fault.Invalid, "only an approval can stand"},
		{"a standing tap in chat", Resolution{Outcome: approve, Clicker: "u", ChatTap: true, Standing: Standing{For: time.Hour}}, time.Hour, fault.Precondition, "a tap in chat approves once"},
		{"standing grants off", Resolution{Outcome: approve, Clicker: "u", Standing: Standing{Session: true}}, 0, fault.Precondition, "standing grants are off"},
		{"a negative time", Resolution{Outcome: approve, Clicker: "u", Standing: Standing{For: -time.Hour}}, time.Hour, fault.Invalid, "must not be negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkClick(c.r, c.max)
			assertFault(t, err, c.kind, c.says)
		})
	}
}

func TestCheckResolution(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	admin := Roles{AdminOf: map[string]bool{"ag_1": true}}
	pending := func(edit ...func(h *guardv1.Hold)) *guardv1.Hold {
		h := &guardv1.Hold{Id: "hold_1", Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, SessionId: "s1", ApprovalsRequired: 1,
			CatalogAction: "a2a.send", AgentGroupId: "ag_1",
			Requester:     &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag_1", SessionId: "s1"}}},
			ApproverRule:  &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: "ag_1"}}},
			ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP, Options: DefaultOptions}
		for _, e := range edit {
			e(h)
		}
		return h
	}
	click := func(o guardv1.Outcome, edit ...func(r *Resolution)) Resolution {
		r := Resolution{HoldID: "hold_1", Outcome: o, Clicker: "telegram:ann", SteppedUp: true}
		for _, e := range edit {
			e(&r)
		}
		return r
	}
	approve, reject := guardv1.Outcome_OUTCOME_APPROVE, guardv1.Outcome_OUTCOME_REJECT
	cases := []struct {
		name   string
		r      Resolution
		rd     resolveReading
		kind   fault.Kind
		says   string
		step   resolveStep
		captor string
	}{
		{name: "an eligible approval resolves", r: click(approve), rd: resolveReading{hold: pending(), roles: admin}, step: stepResolve},
		{name: "a reject resolves", r: click(reject), rd: resolveReading{hold: pending(), roles: admin}, step: stepResolve},
		{name: "not eligible", r: click(approve), rd: resolveReading{hold: pending(), roles: Roles{}},
			kind: fault.Denied, says: "telegram:ann may not resolve hold hold_1: only admins of group ag_1"},
		{name: "eligibility before status", r: click(approve), rd: resolveReading{hold: pending(func(h *guardv1.Hold) {
			h.Status = guardv1.HoldStatus_HOLD_STATUS_APPROVED
		}), roles: Roles{}}, kind: fault.Denied, says: "may not resolve"},
		{name: "resolved already", r: click(reject), rd: resolveReading{hold: pending(func(h *guardv1.Hold) {
			h.Status = guardv1.HoldStatus_HOLD_STATUS_REJECTED
		}), roles: admin}, kind: fault.Precondition, says: "already resolved (rejected)"},
		{name: "expired", r: click(approve), rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.ExpiresAt = timestamppb.New(now) }), roles: admin},
			kind: fault.Precondition, says: "has expired"},
		{name: "not yet expired", r: click(approve), rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.ExpiresAt = timestamppb.New(now.Add(time.Second)) }), roles: admin},
			step: stepResolve},
		{name: "a step-up from chat", r: click(approve, func(r *Resolution) { r.SteppedUp = false }),
			rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.StepUp = true }), roles: admin}, kind: fault.Precondition, says: "needs a step-up"},
		{name: "a step-up rejected from chat", r: click(reject, func(r *Resolution) { r.SteppedUp = false }),
			rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.StepUp = true }), roles: admin}, step: stepResolve},
		{name: "a frozen agent's approval", r: click(approve), rd: resolveReading{hold: pending(), roles: admin, frozenBy: "telegram:olga"},
			kind: fault.Precondition, says: "frozen by telegram:olga"},
		{name: "a frozen agent's reject", r: click(reject), rd: resolveReading{hold: pending(), roles: admin, frozenBy: "telegram:olga"}, step: stepResolve},
		{name: "standing on a global hold", r: click(approve, func(r *Resolution) { r.Standing = Standing{For: time.Hour} }),
			rd:   resolveReading{hold: pending(func(h *guardv1.Hold) { h.ApproverScope = guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL }), roles: Roles{Owner: true}},
			kind: fault.Precondition, says: "global-scope hold"},
		{name: "standing for a sessionless hold's session", r: click(approve, func(r *Resolution) { r.Standing = Standing{Session: true} }),
			rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.SessionId = "" }), roles: admin}, kind: fault.Precondition, says: "no session to stand for"},
		{name: "standing for an hour", r: click(approve, func(r *Resolution) { r.Standing = Standing{For: time.Hour} }),
			rd: resolveReading{hold: pending(), roles: admin}, step: stepResolve},
		{name: "a choice the card lacks", r: click(approve, func(r *Resolution) { r.Choice = "maybe" }), rd: resolveReading{hold: pending(), roles: admin},
			kind: fault.Invalid, says: `"maybe" is not an option`},
		{name: "reject with reason arms a capture", r: click(reject, func(r *Resolution) { r.Choice = ChoiceRejectWithReason }),
			rd: resolveReading{hold: pending(), roles: admin}, step: stepArmReason},
		{name: "reject with its reason resolves", r: click(reject, func(r *Resolution) { r.Choice, r.Reason = ChoiceRejectWithReason, "no" }),
			rd: resolveReading{hold: pending(), roles: admin}, step: stepResolve},
		{name: "no session to tell a reason: rejected at once", r: click(reject, func(r *Resolution) { r.Choice = ChoiceRejectWithReason }),
			rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.SessionId = "" }), roles: admin}, step: stepResolve},
		{name: "one approval of two", r: click(approve), rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.ApprovalsRequired = 2 }), roles: admin},
			step: stepCountApproval},
		{name: "one reject of a quorum rejects", r: click(reject), rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.ApprovalsRequired = 2 }), roles: admin},
			step: stepResolve},
		{name: "another's capture is checked", r: click(approve), rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.AwaitingReasonFrom = "telegram:bob" }), roles: admin},
			step: stepResolve, captor: "telegram:bob"},
		{name: "one's own capture is not", r: click(reject, func(r *Resolution) { r.Reason = "because" }),
			rd: resolveReading{hold: pending(func(h *guardv1.Hold) { h.AwaitingReasonFrom = "telegram:ann" }), roles: admin}, step: stepResolve},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := checkResolution(c.r, c.rd, now)
			if c.says == "" {
				c.kind = accepted
			}
			assertFault(t, err, c.kind, c.says)
			if err == nil && (v.step != c.step || v.captor != c.captor) {
				t.Fatalf("verdict %+v, want step %d captor %q", v, c.step, c.captor)
			}
		})
	}
}

func TestCaptureHolds(t *testing.T) {
	h := &guardv1.Hold{Id: "hold_1", ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
		ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: "ag_1"}}}}
	err := captureHolds(h, "telegram:bob", Roles{AdminOf: map[string]bool{"ag_1": true}})
	assertFault(t, err, fault.Precondition, "awaits a reject reason from telegram:bob")
	// A role revoked since ends the capture: the click goes on.
	assertFault(t, captureHolds(h, "telegram:bob", Roles{}), accepted, "")
}

// accepted is the kind of no refusal.
const accepted fault.Kind = -1

// assertFault: err is a fault of kind saying says (accepted: no error).
func assertFault(t *testing.T, err error, kind fault.Kind, says string) {
	t.Helper()
	if kind == accepted {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if !fault.Is(err, kind) || !strings.Contains(err.Error(), says) {
		t.Fatalf("got %v, want a %v fault saying %q", err, kind, says)
	}
}
