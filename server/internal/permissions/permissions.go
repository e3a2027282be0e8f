// Package permissions registers the catalog entries of the two human
// admission seams (the seed's permissions/guard.ts): channels.register —
// the registering human must be an owner, a global admin or the approver
// the card was delivered to (D4) — and senders.admit, the
// unknown_sender_policy decision verbatim.
package permissions

import (
	"errors"
	"fmt"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Catalog actions and hold kinds.
const (
	ChannelsRegister          = "channels.register"
	SendersAdmit              = "senders.admit"
	SenderAdmitApprovalAction = "sender_admit"
)

// Entries are the two entries.
func Entries() []guard.Entry {
	return []guard.Entry{channelsRegister(), sendersAdmit()}
}

// Register adds both entries.
func Register(cat *guard.Catalog) error {
	for _, e := range Entries() {
		if err := cat.Register(e); err != nil {
			return err
		}
	}
	return nil
}

// messagingGroup is the messaging group an input names: resource
// messaging_group, or the payload's messaging_group_id (the seed's questionId).
func messagingGroup(in *guard.Input) string {
	if mg := in.Resource["messaging_group"]; mg != "" {
		return mg
	}
	if mg := in.Arg("messaging_group_id"); mg != "" {
		return mg
	}
	return in.Arg("questionId")
}

func channelsRegister() guard.Entry {
	return guard.Entry{
		Action:      ChannelsRegister,
		Description: "a human approves a channel registration (resource messaging_group=<id>)",
		Args: func(in *guard.Input) []any {
			return []any{messagingGroup(in), in.Actor.GetHuman().GetUserId()}
		},
		// The chat's pending registration; the user's roles are the actor's own.
		Names:    func(in *guard.Input) []guard.Ref { return refs(guard.Ref{Kind: guard.RefChat, ID: messagingGroup(in)}) },
		Precheck: humanOnly("channel registration is resolved by a human approver"),
		Facts: []guard.Fact{
			{Name: "pending_approver", SQL: `SELECT approver_user_id FROM pending_channel_registrations WHERE messaging_group_id = $6::text`},
			{Name: "is_owner", SQL: `SELECT EXISTS (SELECT 1 FROM user_roles WHERE user_id = $7::text AND role = 'owner')`},
			{Name: "is_global_admin", SQL: `SELECT EXISTS (SELECT 1 FROM user_roles
				WHERE user_id = $7::text AND role = 'admin' AND agent_group_id IS NULL)`},
		},
		Baseline: func(in *guard.Input, f guard.Facts) (guard.Decision, error) {
			user := in.Actor.GetHuman().GetUserId()
			if user == "" {
				return guard.Deny("channel registration is resolved by a human approver"), nil
			}
			if !f.Has("pending_approver") {
				return guard.Denyf("no pending channel registration for %s", messagingGroup(in)), nil
			}
			// The one click rule: mayResolve(admins-of-scope{anchor: none,
			// delivered_to}, group, user) — owners, global admins and the
			// delivered-to approver — over roles read with the facts.
			roles := approvals.Roles{Owner: f.Bool("is_owner"), GlobalAdmin: f.Bool("is_global_admin")}
			rule := guard.AdminsOfScope("", f.Str("pending_approver"))
			if approvals.MayResolveWithRoles(rule, guardv1.ApproverScope_APPROVER_SCOPE_GROUP, user, roles) {
				return guard.Allow("eligible channel-registration approver"), nil
			}
			return guard.Deny("not an eligible channel-registration approver (owner / global admin)"), nil
		},
	}
}

func sendersAdmit() guard.Entry {
	return guard.Entry{
		Action:         SendersAdmit,
		ApprovalAction: SenderAdmitApprovalAction,
		Description:    "an unknown sender messages a chat (resource messaging_group=<id>)",
		Args:           func(in *guard.Input) []any { return []any{messagingGroup(in), admitGroup(in)} },
		// The chat's sender policy and its wiring to the named group.
		Names: func(in *guard.Input) []guard.Ref {
			return refs(guard.Ref{Kind: guard.RefChat, ID: messagingGroup(in)}, guard.Ref{Kind: guard.RefAgentGroup, ID: admitGroup(in)})
		},
		// The sender is a chat's (a user, or the system for one without an
		// identity): an agent, through its runner, has no admission to ask
		// for, and must neither file an admission card for another group's
		// chat nor read its policy.
		Precheck: func(in *guard.Input, _ guard.Facts) error {
			if _, agent := in.AgentGroup(); agent {
				return errors.New("sender admission is decided for a chat's sender, not " + guard.ActorInWords(in.Actor))
			}
			return nil
		},
		// Bind a sender_admit grant to the sender, chat and agent group it
		// was approved for: an approval for one stranger must not admit
		// another, nor into another group of the chat.
		GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
			sender, _ := g.Payload["sender_user_id"].(string)
			mg, _ := g.Payload["messaging_group_id"].(string)
			ag, _ := g.Payload["agent_group_id"].(string)
			user := in.Actor.GetHuman().GetUserId()
			return sender != "" && sender == user && mg != "" && mg == messagingGroup(in) && (ag == "" || ag == admitGroup(in))
		},
		Facts: []guard.Fact{
			{Name: "policy", SQL: `SELECT unknown_sender_policy FROM messaging_groups WHERE id = $6::text`},
			// The group the sender is admitted to, when it is wired to the
			// chat; with none named, the chat's first wired group.
			{Name: "wired_group", SQL: `SELECT agent_group_id FROM messaging_group_agents
				WHERE messaging_group_id = $6::text AND ($7::text = '' OR agent_group_id = $7::text)
				ORDER BY created_at, agent_group_id LIMIT 1`},
		},
		Baseline: func(in *guard.Input, f guard.Facts) (guard.Decision, error) {
			// The policy is read live (the seed passed it in); a chat that is
			// not on record has none, and denies.
			policy := f.Str("policy")
			switch policy {
			case "public":
				return guard.Allow("public messaging group"), nil
			case "request_approval":
				// The admins of the group the sender would join approve — not
				// those of another group wired to the same chat.
				group := f.Str("wired_group")
				if named := admitGroup(in); named != "" && group == "" {
					return guard.Denyf("agent group %s is not wired to messaging group %s", named, messagingGroup(in)), nil
				}
				return guard.Hold(guard.AdminsOfScope(group, ""), guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
					"unknown sender requires admission approval"), nil
			}
			return guard.Deny(fmt.Sprintf("unknown sender (policy %s)", policyName(policy))), nil
		},
	}
}

// admitGroup is the agent group a sender admission is for: resource
// agent_group, or the payload's agent_group_id ("" when not named).
func admitGroup(in *guard.Input) string {
	if g := in.Resource["agent_group"]; g != "" {
		return g
	}
	return in.Arg("agent_group_id")
}

// humanOnly refuses a non-human actor before the baseline: a precheck's
// deny shows none of the facts read (they are of a chat the actor may not
// read), and no hold is created.
func humanOnly(why string) func(in *guard.Input, _ guard.Facts) error {
	return func(in *guard.Input, _ guard.Facts) error {
		if in.Actor.GetHuman().GetUserId() == "" {
			return errors.New(why + "; the actor is " + guard.ActorInWords(in.Actor))
		}
		return nil
	}
}

// refs drops the references the input leaves empty.
func refs(rs ...guard.Ref) []guard.Ref {
	out := rs[:0]
	for _, r := range rs {
		if r.ID != "" {
			out = append(out, r)
		}
	}
	return out
}

func policyName(p string) string {
	if p == "" {
		return "unknown"
	}
	return p
}
