// Package commands derives one guard catalog entry per admin RPC from the
// RPC's (guard.v1.rule) option — declaration is registration: adding an RPC
// with its rule adds its entry, nothing else is edited. The entries run the
// admin baseline, ported verbatim from the seed's cli/guard.ts.
package commands

import (
	"fmt"
	"reflect"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// ApprovalAction is the hold kind of a held admin RPC.
const ApprovalAction = "cli_command"

// GroupScopedResources are reachable under cli_scope = group and, because
// their rows anchor to one agent group, are the resources whose held
// mutations have group-local blast radius.
var GroupScopedResources = map[string]bool{"groups": true, "sessions": true, "destinations": true, "members": true}

// groupArgs are the argument names that carry an agent group id.
var groupArgs = []string{"agent_group_id", "group"}

// GroupArgs lists the request fields the guard interceptor fills with an
// agent caller's own group when they are empty (the seed's auto-fill).
var GroupArgs = []string{"agent_group_id", "group", "from_group"}

// CLIScopeFact reads the actor group's cli_scope (NULL when the group has
// no container config row: that reads as "group").
var CLIScopeFact = guard.Lookup{Table: "container_configs",
	Key: []guard.KeyEq{{Column: "agent_group_id", Equals: guard.ActorGroup}}, Column: "cli_scope"}.Fact("cli_scope")

// GroupExistsFact reads whether the actor's agent group exists.
var GroupExistsFact = guard.Lookup{Table: "agent_groups",
	Key: []guard.KeyEq{{Column: "id", Equals: guard.ActorGroup}}}.Fact("group_exists")

// CLIScope is the actor group's cli_scope, "group" when the row is missing.
func CLIScope(f guard.Facts) string {
	if s := f.Str("cli_scope"); s != "" {
		return s
	}
	return "group"
}

// Register adds an entry for every admin RPC of the control plane's services.
func Register(cat *guard.Catalog) error {
	methods := rpcdecl.AdminMethods(rpcdecl.Services...)
	if len(methods) == 0 {
		return fmt.Errorf("commands: no admin RPCs found (proto descriptors not linked?)")
	}
	for _, m := range methods {
		if err := cat.Register(Entry(m)); err != nil {
			return err
		}
	}
	return nil
}

// Entry is the catalog entry of one admin RPC.
func Entry(m rpcdecl.Method) guard.Entry {
	r := m.Rule
	groupFields := rpcdecl.MethodGroupFields(m.FullMethod)
	e := guard.Entry{
		Action:      r.GetAction(),
		Description: "admin RPC " + m.FullMethod,
		Access:      r.GetAccess(),
		Resource:    r.GetResource(),
		Facts:       []guard.Fact{CLIScopeFact},
		Baseline: func(in *guard.Input, f guard.Facts) (guard.Decision, error) {
			return Baseline(r, groupFields, in, f), nil
		},
		Explain:   explainer(r),
		TraceArgs: traceArgs(groupFields),
	}
	if r.GetAccess() == guardv1.Access_ACCESS_APPROVAL {
		e.ApprovalAction = ApprovalAction
		// Bind a cli_command grant to the exact RPC and request it was approved for.
		full := m.FullMethod
		e.GrantMatches = func(g *guard.GrantRow, in *guard.Input) bool {
			method, _ := g.Payload["method"].(string)
			req, _ := g.Payload["request"].(map[string]any)
			if req == nil {
				req = map[string]any{}
			}
			return method == full && reflect.DeepEqual(req, nonNil(in.Payload))
		}
	}
	return e
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Baseline is the admin baseline (seed commandBaseline): host allow; agents
// by cli_scope, then access. Humans (user tokens) may make open reads — the
// handlers scope results to what the user's roles allow (resources' viewer,
// approvals' eligibility) — freezes (checked by role in the handler) and
// standing grants' revocations (checked against the hold's approvers), and nothing else; other callers are denied.
// groupFields are the request's fields marked (guard.v1.names_group).
func Baseline(r *guardv1.Rule, groupFields []string, in *guard.Input, f guard.Facts) guard.Decision {
	switch in.ActorKind() {
	case "host":
		return guard.Allow("host caller (operator)")
	case "agent":
	default:
		if r.GetResource() == "approvals" && r.GetAccess() == guardv1.Access_ACCESS_OPEN {
			return guard.Allow("approval reads are filtered by the approvals service")
		}
		if in.ActorKind() == "human" && r.GetAccess() == guardv1.Access_ACCESS_OPEN {
			return guard.Allow("user read, scoped to the user's roles")
		}
		if in.ActorKind() == "human" && r.GetResource() == "freezes" {
			// A person stops agents at once, no approval between: the
			// handler lets owners and global admins freeze any scope and a
			// group's admins their group (resources/freezes.go).
			return guard.Allow("a freeze by a person, checked against their roles")
		}
		if in.ActorKind() == "human" && r.GetAction() == "grants.revoke" {
			// Revoking a standing grant only narrows: its handler lets the
			// users who may resolve the grant's hold do it.
			return guard.Allow("a standing grant's revocation, checked against the hold's approvers")
		}
		return guard.Deny("CLI commands accept host or agent callers only.")
	}
	group, _ := in.AgentGroup()
	resource := r.GetResource()
	switch CLIScope(f) {
	case "disabled":
		return guard.Deny("CLI access is disabled for this agent group.")
	case "group":
		// Only allow-listed resources and resource-less commands (like help).
		// The allowlist is a gate an operator may roll out in audit or warn
		// mode: relaxed, the rest of the baseline still decides (a mutation
		// of a non-group resource then holds at global scope, always enforced).
		if resource != "" && !GroupScopedResources[resource] {
			d := guard.Denyf("CLI access is scoped to this agent group. Cannot access %q.", resource)
			rest := groupChecks(r, groupFields, in, group, resource)
			d.Gate, d.Relaxed = true, &rest
			return d
		}
		return groupChecks(r, groupFields, in, group, resource)
	case "global":
	default:
		// Fail closed: a scope this code does not know is not "global".
		return guard.Denyf("CLI access: unknown cli_scope %q for this agent group.", CLIScope(f))
	}
	return access(r, groupFields, in, group, resource)
}

// groupChecks are the cli_scope = group protections after the allowlist:
// never relaxed by a mode.
func groupChecks(r *guardv1.Rule, groupFields []string, in *guard.Input, group, resource string) guard.Decision {
	// Every agent-group argument must name the caller's group; id names
	// the group only for groups and destinations.
	for _, key := range groupArgs {
		if in.HasArg(key) && in.Arg(key) != group {
			return guard.Deny("CLI access is scoped to this agent group.")
		}
	}
	if (resource == "groups" || resource == "destinations") && in.HasArg("id") && in.Arg("id") != group {
		return guard.Deny("CLI access is scoped to this agent group.")
	}
	// Privilege escalation: a group-scoped agent may not change cli_scope.
	if _, ok := in.Payload["cli_scope"]; ok {
		return guard.Deny("Cannot change cli_scope from a group-scoped agent.")
	}
	if _, ok := in.Payload["cli-scope"]; ok {
		return guard.Deny("Cannot change cli_scope from a group-scoped agent.")
	}
	return access(r, groupFields, in, group, resource)
}

// access is the last step: an approval-access command holds for the admins
// of the caller's group (at the blast radius of what it touches).
func access(r *guardv1.Rule, groupFields []string, in *guard.Input, group, resource string) guard.Decision {
	if r.GetAccess() == guardv1.Access_ACCESS_APPROVAL {
		return guard.Hold(guard.AdminsOfScope(group, ""), ApproverScopeFor(resource, groupFields, in.Payload, group),
			fmt.Sprintf("agent-initiated %q requires admin approval", r.GetAction()))
	}
	return guard.Allow("open command")
}

// ApproverScopeFor is the blast radius of a held command (D1): a mutation of
// a non-group-scoped resource (roles, users, wirings, messaging-groups,
// policies, ...) — or one with any argument naming another agent group
// (destinations.add --target-group included) — needs an owner or global
// admin to approve; a scoped admin's click is refused. Which arguments name
// a group is declared in the protos ((guard.v1.names_group), groupFields),
// never listed here, so a new RPC's group argument cannot be forgotten.
func ApproverScopeFor(resource string, groupFields []string, args map[string]any, callerGroup string) guardv1.ApproverScope {
	if resource == "" || !GroupScopedResources[resource] {
		return guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL
	}
	for _, path := range groupFields {
		for _, v := range argValues(args, strings.Split(path, ".")) {
			if v != "" && v != callerGroup {
				return guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL
			}
		}
	}
	return guardv1.ApproverScope_APPROVER_SCOPE_GROUP
}

// argValues are the values at a dotted path of a JSON-shaped request; a
// value that is not a string (a forged shape) reads as "?" so it is never
// taken for the caller's group.
func argValues(args map[string]any, path []string) []string {
	v, ok := args[path[0]]
	if !ok || v == nil {
		return nil
	}
	if len(path) > 1 {
		m, ok := v.(map[string]any)
		if !ok {
			return []string{"?"}
		}
		return argValues(m, path[1:])
	}
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				s = "?"
			}
			out = append(out, s)
		}
		return out
	}
	return []string{"?"}
}

// HeldByTheirRPC are the catalog's actions whose holds only the admin-RPC
// interceptor creates, storing the RPC itself as the held payload.
func HeldByTheirRPC(cat *guard.Catalog) map[string]bool {
	out := map[string]bool{}
	for _, e := range cat.List() {
		if e.ApprovalAction == ApprovalAction {
			out[e.Action] = true
		}
	}
	return out
}
