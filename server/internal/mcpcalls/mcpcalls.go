// Package mcpcalls registers the mcp.call catalog entry: an agent's call of
// a tool of a guarded MCP server, which the runner hosts outside the agent's
// container and forwards only after this decision. The decided resource is
// {server, tool, digest}: the digest binds an approval to the exact
// arguments (proto/mcpcall). The operator's effect for the tool, else the
// server's default, else hold, decides; a server the group does not have
// denies. Quorum and mode come with the setting, through the guard's own
// mechanisms (Decision.Approvals, Decision.Mode).
package mcpcalls

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Action is the catalog action; ApprovalAction the hold kind of its grants.
const (
	Action         = mcpcall.CatalogAction
	ApprovalAction = mcpcall.ApprovalKind
)

// serversExpr reads the names of a group's MCP servers from its container
// config, as a JSON array (NULL when it has none).
const serversExpr = `(SELECT jsonb_agg(e->>'name') FROM jsonb_array_elements(%s) AS e)::text`

// Entry is the mcp.call catalog entry.
func Entry() guard.Entry {
	return guard.Entry{
		Action:         Action,
		ApprovalAction: ApprovalAction,
		Description:    "an agent calls a tool of a guarded MCP server (resource server, tool and digest of the call)",
		Args: func(in *guard.Input) []any {
			return []any{in.Resource[mcpcall.KeyServer], in.Resource[mcpcall.KeyTool]}
		},
		// Every fact is a row of the actor's own group, keyed by the server
		// and tool the request names: nothing of another group is read.
		Names: func(*guard.Input) []guard.Ref { return []guard.Ref{} },
		Facts: []guard.Fact{
			commands.GroupExistsFact,
			guard.Lookup{Table: "container_configs", Key: []guard.KeyEq{{Column: "agent_group_id", Equals: guard.ActorGroup}},
				Column: "mcp_servers", Expr: serversExpr}.Fact("servers"),
			toolSetting("effect").Fact("tool_effect"),
			toolSetting("approvals").Fact("tool_approvals"),
			toolSetting("mode").Fact("tool_mode"),
			serverSetting("default_effect").Fact("server_effect"),
			serverSetting("approvals").Fact("server_approvals"),
			serverSetting("mode").Fact("server_mode"),
		},
		Precheck: precheck,
		Baseline: baseline,
		Explain:  explain,
		// The engine binds the grant to the decided resource (server, tool,
		// digest); the held payload must also be the call that digest names.
		GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
			d, err := payloadDigest(g.Payload)
			return err == nil && d == in.Resource[mcpcall.KeyDigest]
		},
	}
}

// Register adds the entry.
func Register(cat *guard.Catalog) error { return cat.Register(Entry()) }

func toolSetting(column string) guard.Lookup {
	return guard.Lookup{Table: "mcp_tool_settings", Key: []guard.KeyEq{
		{Column: "agent_group_id", Equals: guard.ActorGroup}, {Column: "server", Equals: guard.Arg(0)}, {Column: "tool", Equals: guard.Arg(1)}},
		Column: column}
}

func serverSetting(column string) guard.Lookup {
	return guard.Lookup{Table: "mcp_server_settings", Key: []guard.KeyEq{
		{Column: "agent_group_id", Equals: guard.ActorGroup}, {Column: "server", Equals: guard.Arg(0)}},
		Column: column}
}

// precheck refuses a malformed call before any hold: names, the payload
// naming the decided server and tool, and the digest being the payload's.
func precheck(in *guard.Input, f guard.Facts) error {
	if _, ok := in.AgentGroup(); ok && !f.Bool("group_exists") {
		return errors.New("mcp_call failed: agent group not found.")
	}
	server, tool := in.Resource[mcpcall.KeyServer], in.Resource[mcpcall.KeyTool]
	switch {
	case !mcpcall.ValidServer(server):
		return fmt.Errorf("mcp_call failed: %q is not an MCP server name.", server)
	case !mcpcall.ValidTool(tool):
		return fmt.Errorf("mcp_call failed: %q is not a tool name.", tool)
	case in.Arg(mcpcall.KeyServer) != server || in.Arg(mcpcall.KeyTool) != tool:
		return fmt.Errorf("mcp_call failed: the payload names %s/%s, the decided resource %s/%s.",
			in.Arg(mcpcall.KeyServer), in.Arg(mcpcall.KeyTool), server, tool)
	}
	d, err := payloadDigest(in.Payload)
	if err != nil {
		return fmt.Errorf("mcp_call failed: %v.", err)
	}
	if d != in.Resource[mcpcall.KeyDigest] {
		return errors.New("mcp_call failed: resource.digest is not the digest of the payload's server, tool and arguments.")
	}
	return nil
}

// payloadDigest is the digest of the call a payload carries.
func payloadDigest(p map[string]any) (string, error) {
	args := map[string]any{}
	if v, ok := p[mcpcall.KeyArguments]; ok && v != nil {
		m, isObj := v.(map[string]any)
		if !isObj {
			return "", errors.New("arguments must be an object")
		}
		args = m
	}
	s, _ := p[mcpcall.KeyServer].(string)
	t, _ := p[mcpcall.KeyTool].(string)
	return mcpcall.Digest(s, t, args)
}

// effective resolves the facts read into the call's effect.
func effective(f guard.Facts) mcpcall.Effective {
	n := func(name string) int { v, _ := strconv.Atoi(f.Str(name)); return v }
	return mcpcall.Resolve(
		mcpcall.Setting{Effect: f.Str("tool_effect"), Approvals: n("tool_approvals"), Mode: f.Str("tool_mode")},
		mcpcall.Setting{Effect: f.Str("server_effect"), Approvals: n("server_approvals"), Mode: f.Str("server_mode")})
}

// configured reports whether the servers fact names server.
func configured(f guard.Facts, server string) bool {
	var names []string
	if json.Unmarshal([]byte(f.Str("servers")), &names) != nil {
		return false
	}
	return slices.Contains(names, server)
}

func baseline(in *guard.Input, f guard.Facts) (guard.Decision, error) {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Deny("an MCP tool call comes only from an agent's session"), nil
	}
	server, tool := in.Resource[mcpcall.KeyServer], in.Resource[mcpcall.KeyTool]
	if !configured(f, server) {
		return guard.Denyf("group %s has no MCP server %q", group, server), nil
	}
	eff := effective(f)
	what := fmt.Sprintf("tool %s of MCP server %s", tool, server)
	switch eff.Effect {
	case mcpcall.EffectAllow:
		return guard.Allow(fmt.Sprintf("%s is allowed (%s)", what, eff.Source)), nil
	case mcpcall.EffectDeny:
		// The operator's deny is a gate: audit and warn modes relax it.
		d := guard.Denyf("%s is denied (%s)", what, eff.Source)
		d.Gate, d.Mode = true, eff.Mode
		return d, nil
	}
	d := guard.Hold(guard.AdminsOfScope(group, ""), guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
		fmt.Sprintf("%s needs approval (%s)", what, eff.Source))
	d.Approvals, d.Mode = eff.Approvals, eff.Mode
	if eff.Approvals > 1 {
		d.Reason += fmt.Sprintf(" (%d approvals needed)", eff.Approvals)
	}
	return d, nil
}
