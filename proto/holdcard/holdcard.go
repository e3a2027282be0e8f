// Package holdcard is what a hold's card says, described once for every
// edge that draws one — the chat bridges' message, the console's hold page,
// ncl's view of a hold: its title, what it asks, who asks, who may decide,
// where its quorum stands, the exact call or payload its grant runs, when
// it expires and how it ended. Each edge lays the card out its own way
// (and names people and groups with what it knows: holdview.Names); none
// decides what the card says.
package holdcard

import (
	"bytes"
	"encoding/json"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
	"github.com/clawguard/clawguard/proto/mcpcall"
)

// Card is a hold's card.
type Card struct {
	Hold *guardv1.Hold
	// Title is the hold's title, or its kind when it has none.
	Title string
	// Question is the requester's question, as it was asked.
	Question string
	// Call is an MCP tool call's exact call, from what its grant is bound
	// to (the hold's resource and payload), never from the requester's
	// words; nil for any other kind.
	Call *Call
	// Expires is when the hold expires (zero: never).
	Expires time.Time
	Quorum  Quorum
	Outcome Outcome
}

// Call is an MCP tool call: the group that asks, the server, the tool and
// the arguments that run, exactly, as indented JSON.
type Call struct {
	Group, Server, Tool, Arguments string
}

// Quorum is where a hold's approvals stand.
type Quorum struct {
	Required int // distinct approvals it needs (at least 1)
	Counted  int // approvals that count now
	// Approvals are those on record, in order; Counts is false for an
	// approver no longer eligible (listed, not counted).
	Approvals []Approval
}

// Approval is one approval on record.
type Approval struct {
	User   string
	At     time.Time
	Counts bool
}

// Outcome is how a hold ended (Status pending: it has not).
type Outcome struct {
	Status guardv1.HoldStatus
	By     string // who resolved it ("" for an expiry or a sweep)
	At     time.Time
	Reason string // a reject's reason
	// Choice is the label of the option picked, for a card of choices.
	Choice string
	// Replayed: its grant was used; Unapplied: why an approved hold was
	// not carried out.
	Replayed  bool
	Unapplied string
}

// Of is h's card.
func Of(h *guardv1.Hold) Card {
	c := Card{Hold: h, Title: h.GetTitle(), Question: h.GetQuestion(), Call: callOf(h)}
	if c.Title == "" {
		c.Title = h.GetKind()
	}
	if e := h.GetExpiresAt(); e != nil {
		c.Expires = e.AsTime()
	}
	c.Quorum = Quorum{Required: int(max(h.GetApprovalsRequired(), 1))}
	for _, a := range h.GetApprovals() {
		c.Quorum.Approvals = append(c.Quorum.Approvals, Approval{User: a.GetUserId(), At: a.GetAt().AsTime(), Counts: !a.GetIneligible()})
		if !a.GetIneligible() {
			c.Quorum.Counted++
		}
	}
	c.Outcome = Outcome{Status: h.GetStatus(), By: h.GetResolver(), Reason: h.GetReason(), Choice: OptionLabel(h, h.GetChoice()),
		Replayed: h.GetConsumed(), Unapplied: h.GetUnappliedReason()}
	if r := h.GetResolvedAt(); r != nil {
		c.Outcome.At = r.AsTime()
	}
	return c
}

// Asks is what the hold asks, in one line (holdview.Summary).
func (c Card) Asks(n holdview.Names) string { return holdview.Summary(c.Hold, n) }

// Requester is who asks (holdview.Requester).
func (c Card) Requester(n holdview.Names) string { return holdview.Requester(c.Hold.GetRequester(), n) }

// Deciders is who may decide, in words, each person and group as the
// edge labels them (holdview.RuleWords).
func (c Card) Deciders(person, group func(id string) string) string {
	return holdview.RuleWords(c.Hold.GetApproverRule(), c.Hold.GetApproverScope(), person, group)
}

// Mine reports whether viewer's approval is on record and counts.
func (q Quorum) Mine(viewer string) bool {
	for _, a := range q.Approvals {
		if a.User == viewer && a.Counts {
			return true
		}
	}
	return false
}

// Payload is the exact payload that runs, as indented JSON ("(no
// payload)" when it has none).
func (c Card) Payload() string {
	p := c.Hold.GetPayload()
	if p == nil {
		return "(no payload)"
	}
	b, err := protojson.Marshal(p)
	if err != nil {
		return "(payload does not encode: " + err.Error() + ")"
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// OptionLabel is the label of the hold's option of value v ("" when none).
func OptionLabel(h *guardv1.Hold, v string) string {
	for _, o := range h.GetOptions() {
		if o.GetValue() == v {
			return o.GetLabel()
		}
	}
	return ""
}

// callOf is an MCP tool call hold's call; nil for another kind.
func callOf(h *guardv1.Hold) *Call {
	if h.GetKind() != mcpcall.ApprovalKind {
		return nil
	}
	args := h.GetPayload().GetFields()[mcpcall.KeyArguments].GetStructValue()
	b, err := json.MarshalIndent(args.AsMap(), "", "  ")
	if err != nil {
		b = []byte("(not shown: " + err.Error() + ")")
	}
	return &Call{Group: h.GetAgentGroupId(), Server: h.GetResource()[mcpcall.KeyServer], Tool: h.GetResource()[mcpcall.KeyTool],
		Arguments: string(b)}
}
