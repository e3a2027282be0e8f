package holdview

import (
	"fmt"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// What the requester of a hold (an agent) is told of it, in the words every
// surface uses: who may approve it, who rejected it and why, who approved
// it and what it asked. The server renders these with the names it knows;
// a runner without names renders the rule's with ids.

// maxNamed bounds the approvers named in one line.
const maxNamed = 5

// Person is a user as the requester reads them: "Dana (telegram:dana)",
// else the id.
func Person(n Names, id string) string {
	if name := User(n, id); name != id && name != "" {
		return name + " (" + id + ")"
	}
	return id
}

// Eligible says who may approve a new hold, by name: the eligible
// approvers in the order the card goes to them — "Dana (telegram:dana) or
// Owen (telegram:owen)", "2 of Dana (…), Erin (…) and Owen (…)" for a
// quorum, the first maxNamed and "N more" past them.
func Eligible(ids []string, n Names, required int) string {
	if len(ids) == 0 {
		return ""
	}
	named := ids[:min(len(ids), maxNamed)]
	people := make([]string, len(named))
	for i, id := range named {
		people[i] = Person(n, id)
	}
	if more := len(ids) - len(named); more > 0 {
		people = append(people, fmt.Sprintf("%d more", more))
	}
	if required > 1 {
		return fmt.Sprintf("%d of %s", required, join(people, "and"))
	}
	return join(people, "or")
}

// Approvers says who may approve under an approver rule, by name where n
// knows them: "Dana (telegram:dana) or Erin (telegram:erin)", "an admin of
// research", "an owner or global admin", with the approver the card was
// delivered to.
func Approvers(r *guardv1.ApproverRule, n Names) string {
	if x := r.GetExclusive(); x != nil {
		var who []string
		for _, id := range append([]string{x.GetUserId()}, x.GetAlsoUserIds()...) {
			who = append(who, Person(n, id))
		}
		return join(who, "or")
	}
	if a := r.GetAdminsOfScope(); a != nil {
		who := "an owner or global admin"
		if g := a.GetAgentGroupId(); g != "" {
			who = "an admin of " + Group(n, g)
		}
		if d := a.GetDeliveredTo(); d != "" {
			who += " (asked: " + Person(n, d) + ")"
		}
		return who
	}
	return ""
}

// ApprovedBy says who approved a hold, by name: the approvals that met its
// quorum, else its resolver ("" when neither is known).
func ApprovedBy(h *guardv1.Hold, n Names) string {
	var who []string
	for _, a := range h.GetApprovals() {
		if !a.GetIneligible() {
			who = append(who, Person(n, a.GetUserId()))
		}
	}
	if len(who) == 0 && h.GetResolver() != "" {
		who = append(who, Person(n, h.GetResolver()))
	}
	return join(who, "and")
}

// Rejected is what the requester of a rejected hold is told: what it
// asked, who rejected it, by name, and why, verbatim.
func Rejected(h *guardv1.Hold, n Names, reason string) string {
	by := Person(n, h.GetResolver())
	if by == "" {
		by = "an approver"
	}
	s := fmt.Sprintf("Your request (%s) was rejected by %s", Summary(h, n), by)
	if reason == "" {
		return s + "; no reason was given."
	}
	return fmt.Sprintf("%s: %q", s, reason)
}

// join lists items as a sentence does: "a", "a or b", "a, b or c".
func join(items []string, word string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + word + " " + items[len(items)-1]
}
