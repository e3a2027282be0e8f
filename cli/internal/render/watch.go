package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// Event prints one hold lifecycle event as it arrives: one JSON object per
// line with -o json (a stream has no end to close an array), one YAML
// document per event with -o yaml, else one human line.
func (p Printer) Event(ev *guardv1.WatchResponse) error {
	if p.JSON {
		v, err := JSONValue(ev)
		if err != nil {
			return err
		}
		if p.YAML {
			if _, err := fmt.Fprintln(p.W, "---"); err != nil {
				return err
			}
			return writeYAML(p.W, v)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		_, err = fmt.Fprintf(p.W, "%s\n", b)
		return err
	}
	h := ev.GetHold()
	if p.Quiet {
		_, err := fmt.Fprintln(p.W, h.GetId())
		return err
	}
	parts := []string{Time(ev.GetAt()), fmt.Sprintf("#%d", ev.GetCursor()), enumword.String(ev.GetType()), h.GetId(), Cell(h.GetKind())}
	if g := h.GetAgentGroupId(); g != "" {
		parts = append(parts, "group="+holdview.Group(p.Names, g))
	}
	switch ev.GetType() {
	case guardv1.EventType_EVENT_TYPE_REQUESTED:
		parts = append(parts, "approver="+RuleNamed(h.GetApproverRule(), p.Names), "scope="+Cell(enumword.String(h.GetApproverScope())))
		if ev.GetUndelivered() {
			parts = append(parts, "undelivered")
		} else if d := h.GetDeliveredTo(); d != "" {
			parts = append(parts, "delivered_to="+holdview.User(p.Names, d))
		}
		if t := h.GetTitle(); t != "" {
			parts = append(parts, fmt.Sprintf("%q", Truncate(t, 80)))
		}
	case guardv1.EventType_EVENT_TYPE_RESOLVED:
		parts = append(parts, "outcome="+enumword.String(ev.GetOutcome()))
		if r := ev.GetResolver(); r != "" {
			parts = append(parts, "by="+holdview.User(p.Names, r))
		}
		if r := h.GetReason(); r != "" {
			parts = append(parts, fmt.Sprintf("reason=%q", r))
		}
	case guardv1.EventType_EVENT_TYPE_APPROVED_PARTIAL:
		parts = append(parts, "by="+holdview.User(p.Names, ev.GetResolver()), fmt.Sprintf("remaining=%d", ev.GetApprovalsRemaining()))
	case guardv1.EventType_EVENT_TYPE_UNAPPLIED:
		parts = append(parts, fmt.Sprintf("not carried out: %q", holdview.Words(p.Names, h.GetUnappliedReason())))
	case guardv1.EventType_EVENT_TYPE_REMINDED:
		parts = append(parts, "approver="+RuleNamed(h.GetApproverRule(), p.Names))
	case guardv1.EventType_EVENT_TYPE_ESCALATED:
		parts = append(parts, "to="+strings.ReplaceAll(Env{Names: p.Names}.Approvers(h.GetEscalatedTo()), ", ", ","))
	case guardv1.EventType_EVENT_TYPE_WARNED:
		parts = append(parts, "action="+h.GetCatalogAction(), fmt.Sprintf("%q", Truncate(h.GetQuestion(), 160)))
	}
	_, err := io.WriteString(p.W, strings.Join(parts, "  ")+"\n")
	return err
}
