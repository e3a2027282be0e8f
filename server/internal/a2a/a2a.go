// Package a2a registers the a2a.send catalog entry: the seed's
// routeAgentMessage decision in its original check order — a missing
// destination denies, a missing target group denies, a self-send allows,
// a message policy holds for its named approver (exclusive), else allow.
// The destination check precedes the policy, so a "ghost" policy (policy
// row, no destination row) still denies.
package a2a

import (
	"fmt"
	"strconv"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Action is the catalog action; ApprovalAction the hold kind of its grants.
const (
	Action         = "a2a.send"
	ApprovalAction = "a2a_message_gate"
)

// Entry is the a2a.send catalog entry. The target group is resource["to"].
func Entry() guard.Entry {
	return guard.Entry{
		Action:         Action,
		ApprovalAction: ApprovalAction,
		Description:    "an agent messages another agent group (resource to=<group>)",
		Args:           func(in *guard.Input) []any { return []any{in.Resource["to"]} },
		// The target is read only through the actor group's own rows: its
		// destination (whose foreign key means the target exists) and its
		// policies (readable from either end). Without a destination the
		// answer does not depend on the target at all.
		Names: func(*guard.Input) []guard.Ref { return []guard.Ref{} },
		Facts: []guard.Fact{
			guard.Lookup{Table: "agent_destinations", Key: []guard.KeyEq{
				{Column: "agent_group_id", Equals: guard.ActorGroup}, {Column: "target_agent_group_id", Equals: guard.Arg(0)}}}.Fact("destination"),
			guard.Lookup{Table: "agent_groups", Key: []guard.KeyEq{{Column: "id", Equals: guard.Arg(0)}}}.Fact("target_exists"),
			policy("approver_user_id", "").Fact("policy_approver"),
			// Further named approvers and the policy's quorum.
			policy("also_approvers", "array_to_string(%s, ' ')").Fact("policy_also"),
			policy("approvals", "").Fact("policy_approvals"),
			// The policy's own enforcement mode ("" inherits a2a.send's).
			policy("mode", "").Fact("policy_mode"),
		},
		// The decision is about resource.to; a payload naming another target
		// would be approved by one policy's approver and delivered elsewhere:
		// refused before any hold, and again at replay.
		Precheck: func(in *guard.Input, _ guard.Facts) error {
			if t := HeldTarget(in.Payload); t != "" && t != in.Resource["to"] {
				return fmt.Errorf("resource.to %q differs from the payload's target %q", in.Resource["to"], t)
			}
			return nil
		},
		Baseline: baseline,
		Explain:  explain,
		// An a2a grant binds to the exact decided target (the stored
		// resource; the payload's for holds made before it was stored).
		GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
			held := g.Resource["to"]
			if held == "" {
				held = HeldTarget(g.Payload)
			}
			pt := HeldTarget(g.Payload)
			return held != "" && held == in.Resource["to"] && (pt == "" || pt == held)
		},
	}
}

// policy reads a column of the message policy from the actor's group to
// the target.
func policy(column, expr string) guard.Lookup {
	return guard.Lookup{Table: "agent_message_policies", Key: []guard.KeyEq{
		{Column: "from_agent_group_id", Equals: guard.ActorGroup}, {Column: "to_agent_group_id", Equals: guard.Arg(0)}},
		Column: column, Expr: expr}
}

// HeldTarget is the target group recorded in a held message's payload: "to"
// (what runners send), or the seed's "platform_id".
func HeldTarget(payload map[string]any) string {
	if s, _ := payload["to"].(string); s != "" {
		return s
	}
	s, _ := payload["platform_id"].(string)
	return s
}

func baseline(in *guard.Input, f guard.Facts) (guard.Decision, error) {
	from, ok := in.AgentGroup()
	if !ok {
		return guard.Deny("agent-to-agent send requires an agent actor"), nil
	}
	to := in.Resource["to"]
	self := to == from
	if !self && !f.Bool("destination") {
		return guard.Denyf("unauthorized agent-to-agent: %s has no destination for %s", from, to), nil
	}
	if !f.Bool("target_exists") {
		return guard.Denyf("target agent group %s not found for message %s", to, fmt.Sprint(in.Payload["id"])), nil
	}
	if self {
		return guard.Allow("self-send"), nil
	}
	if approver := f.Str("policy_approver"); f.Has("policy_approver") {
		rule := guard.Exclusive(approver)
		who := approver
		if also := f.Str("policy_also"); also != "" {
			// User ids hold no whitespace (resources.validUserID).
			rule.GetExclusive().AlsoUserIds = strings.Fields(also)
			who = approver + ", " + strings.Join(strings.Fields(also), ", ")
		}
		d := guard.Hold(rule, guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
			fmt.Sprintf("a2a message policy %s → %s holds for %s", from, to, who))
		if n, err := strconv.Atoi(f.Str("policy_approvals")); err == nil && n > 1 {
			d.Approvals = n
			d.Reason += fmt.Sprintf(" (%d approvals needed)", n)
		}
		d.Mode = f.Str("policy_mode")
		return d, nil
	}
	return guard.Allow("destination grant exists"), nil
}

// Register adds the entry.
func Register(cat *guard.Catalog) error { return cat.Register(Entry()) }
