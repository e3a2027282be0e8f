package a2a

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/clawguard/clawguard/server/internal/guard"
)

// explain walks the baseline's checks in its order and says what would
// change the answer ("held because the policy A → B names Dana; no policy →
// allow").
func explain(in *guard.Input, f guard.Facts, d guard.Decision) guard.Explained {
	from, ok := in.AgentGroup()
	if !ok {
		return guard.Explained{Checks: []guard.Check{{Name: "agent actor", Outcome: "deny",
			Detail: "only an agent sends agent-to-agent messages; the actor is " + guard.ActorInWords(in.Actor)}}}
	}
	to := in.Resource["to"]
	route := from + " → " + to
	var x guard.Explained
	add := func(name, outcome, detail string, facts ...string) {
		x.Checks = append(x.Checks, guard.Check{Name: name, Facts: facts, Outcome: outcome, Detail: detail})
	}
	self := to == from
	switch {
	case self:
		add("destination", "skipped", "a group messaging itself needs no destination", "destination")
	case !f.Bool("destination"):
		add("destination", "deny", "no destination "+route+" exists", "destination")
		x.Summary = "denied because group " + from + " has no destination for " + to
		x.WouldChange = []string{
			// The destination's name is what the agents will call the
			// target: its name where the reader knows it (the edge names
			// the id), so the command is complete as printed.
			fmt.Sprintf("a destination %s (ncl destinations add --group %s --target-group %s --name %s) → allow, or hold if a message policy %s names an approver", route, from, to, to, route),
		}
		return x
	default:
		add("destination", "pass", "the destination "+route+" exists", "destination")
	}
	if !f.Bool("target_exists") {
		add("target group", "deny", "target group "+to+" does not exist", "target_exists")
		x.Summary = "denied because target group " + to + " does not exist"
		x.WouldChange = []string{"a group " + to + " → the destination and policy checks decide"}
		return x
	}
	add("target group", "pass", "target group "+to+" exists", "target_exists")
	if self {
		add("self-send", "allow", "a group may always message itself")
		x.Summary = "allowed because it is a self-send"
		return x
	}
	if f.Has("policy_approver") {
		approver := f.Str("policy_approver")
		detail := "the message policy " + route + " names " + approver + " as the only approver"
		if also := strings.Fields(f.Str("policy_also")); len(also) > 0 {
			approver += ", " + strings.Join(also, ", ")
			detail = "the message policy " + route + " names " + approver + " as its only approvers"
		}
		if n, err := strconv.Atoi(f.Str("policy_approvals")); err == nil && n > 1 {
			detail += fmt.Sprintf("; %d of them must approve", n)
		}
		add("message policy", "hold", detail, "policy_approver", "policy_also", "policy_approvals")
		x.Summary = fmt.Sprintf("held because the message policy %s names %s; no policy → allow", route, approver)
		x.WouldChange = []string{
			"no message policy " + route + " → allow (the destination exists)",
			"no destination " + route + " → deny",
		}
		return x
	}
	add("message policy", "allow", "no message policy "+route+" holds it", "policy_approver")
	x.Summary = "allowed because the destination " + route + " exists and no message policy holds it"
	x.WouldChange = []string{
		"a message policy " + route + " naming an approver → hold for that approver alone",
		"no destination " + route + " → deny",
	}
	return x
}
