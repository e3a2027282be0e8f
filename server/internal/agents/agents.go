// Package agents registers the agents.create catalog entry: the seed's
// create_agent cli_scope branch, verbatim. A trusted global-scope group
// creates directly; every other group — the default "group" scope, and an
// unknown or missing config, failing closed — is held for its admins.
package agents

import (
	"errors"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Action is the catalog action; ApprovalAction the hold kind of its grants.
const (
	Action         = "agents.create"
	ApprovalAction = "create_agent"
)

// Entry is the agents.create catalog entry.
func Entry() guard.Entry {
	return guard.Entry{
		Action:         Action,
		ApprovalAction: ApprovalAction,
		Description:    "an agent creates a sub-agent (create_agent)",
		Facts: []guard.Fact{
			commands.CLIScopeFact,
			commands.GroupExistsFact,
		},
		Precheck: func(in *guard.Input, f guard.Facts) error {
			if in.Arg("name") == "" {
				return errors.New("create_agent failed: name is required.")
			}
			if _, ok := in.AgentGroup(); ok && !f.Bool("group_exists") {
				return errors.New("create_agent failed: source agent group not found.")
			}
			return nil
		},
		Baseline: func(in *guard.Input, f guard.Facts) (guard.Decision, error) {
			group, ok := in.AgentGroup()
			if !ok {
				return guard.Deny("create_agent is a container-originated action."), nil
			}
			// Only an explicit "global" row trusts the group; a missing row
			// is not "global" (commands.CLIScope reads it as "group").
			if f.Str("cli_scope") == "global" {
				return guard.Allow("trusted global-scope agent group"), nil
			}
			return guard.Hold(guard.AdminsOfScope(group, ""), guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
				"agent-initiated create_agent requires admin approval"), nil
		},
		Explain:   explain,
		TraceArgs: []string{"name"},
		// A create_agent grant binds to the approved name.
		GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
			name, _ := g.Payload["name"].(string)
			return name != "" && name == in.Arg("name")
		},
	}
}

// Register adds the entry.
func Register(cat *guard.Catalog) error { return cat.Register(Entry()) }
