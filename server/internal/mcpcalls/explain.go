package mcpcalls

import (
	"fmt"

	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// explain names the server and the tool, the setting that decided and what
// would change the answer.
func explain(in *guard.Input, f guard.Facts, d guard.Decision) guard.Explained {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Explained{Checks: []guard.Check{{Name: "agent actor", Outcome: "deny",
			Detail: "only an agent's session calls MCP tools; the actor is " + guard.ActorInWords(in.Actor)}}}
	}
	server, tool := in.Resource[mcpcall.KeyServer], in.Resource[mcpcall.KeyTool]
	what := fmt.Sprintf("tool %s of MCP server %s", tool, server)
	var x guard.Explained
	if !configured(f, server) {
		x.Checks = []guard.Check{{Name: "server", Facts: []string{"servers"}, Outcome: "deny",
			Detail: fmt.Sprintf("group %s has no MCP server %q", group, server)}}
		x.Summary = fmt.Sprintf("denied because group %s has no MCP server %s", group, server)
		x.WouldChange = []string{fmt.Sprintf("an MCP server %s in group %s (ncl groups mcp add, or an approved add_mcp_server) → its settings decide", server, group)}
		return x
	}
	x.Checks = append(x.Checks, guard.Check{Name: "server", Facts: []string{"servers"}, Outcome: "pass",
		Detail: fmt.Sprintf("group %s has MCP server %s", group, server)})
	eff := effective(f)
	facts := []string{"tool_effect", "server_effect"}
	detail := map[string]string{
		mcpcall.FromTool:          "the operator set " + eff.Effect + " on the tool",
		mcpcall.FromServerDefault: "no setting on the tool; the server's default is " + eff.Effect,
		mcpcall.FromBuiltIn:       "no setting on the tool and no default on the server: an MCP tool call holds",
	}[eff.Source]
	x.Checks = append(x.Checks, guard.Check{Name: "tool effect", Facts: facts, Outcome: eff.Effect, Detail: detail})
	if eff.Approvals > 1 {
		x.Checks = append(x.Checks, guard.Check{Name: "quorum", Facts: []string{"tool_approvals", "server_approvals"}, Outcome: "hold",
			Detail: fmt.Sprintf("%d distinct approvals", eff.Approvals)})
	}
	x.Summary = fmt.Sprintf("%s: %s (%s)", verbed(d.Effect), what, eff.Source)
	set := fmt.Sprintf("ncl mcp tools set --group %s --server %s --tool %s --effect", group, server, tool)
	for _, e := range []string{mcpcall.EffectAllow, mcpcall.EffectHold, mcpcall.EffectDeny} {
		if e != eff.Effect {
			x.WouldChange = append(x.WouldChange, fmt.Sprintf("%s %s → %s", set, e, e))
		}
	}
	x.WouldChange = append(x.WouldChange, "removing MCP server "+server+" from the group → deny")
	return x
}

func verbed(e guard.Effect) string {
	switch e {
	case guard.EffectAllow:
		return "allowed"
	case guard.EffectDeny:
		return "denied"
	}
	return "held"
}
