package ncl

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl mcp: a group's guarded MCP servers (added with ncl groups mcp add or
// an approved add_mcp_server) and the effect of each tool call: allow,
// hold or deny, per tool, with a default per server for the tools nobody
// set (hold when there is none).
func (a *app) mcpCmd() *cobra.Command {
	var sgroup string
	var sLimit int32
	slist := &cobra.Command{
		Use: "list", Short: "List a group's guarded MCP servers with their defaults and state",
		Example: "  ncl mcp servers list --group ag_4888a21379a5cf01", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&sgroup)
			return a.listPages(cmd, &guardv1.McpServerInfo{}, sLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListMcpServers(ctx, &guardv1.ListMcpServersRequest{Group: sgroup, Limit: size, PageToken: token})
				return render.Msgs(resp.GetServers()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(slist, &sLimit)
	slist.Flags().StringVar(&sgroup, "group", "", "agent group")
	required(slist, "group")

	var dgroup, dserver, dmode string
	var dapprovals int32
	def := &cobra.Command{
		Use: "set-default", Short: "Set a server's effect for the tools nobody set",
		Long: `Set the effect of every tool of the server that has no setting of its
own: allow, hold or deny (--effect none removes the default: hold). Tools
the server lists later take it too. --approvals and --mode apply to the
holds and gates of those tools, as for any gate.`,
		Example: "  ncl mcp servers set-default --group ag_4888a21379a5cf01 --server github --effect deny", Args: none,
	}
	var deffect string
	def.Flags().StringVar(&deffect, "effect", "", "allow, hold, deny, or none (remove the default)")
	def.RunE = func(cmd *cobra.Command, _ []string) error {
		mode, err := parseMode(dmode)
		if err != nil {
			return err
		}
		effect, err := parseMCPEffect(deffect)
		if err != nil {
			return err
		}
		a.groupArgs(&dgroup)
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.SetMcpServerDefault(ctx, &guardv1.SetMcpServerDefaultRequest{Group: dgroup, Server: dserver,
				Effect: effect, Approvals: dapprovals, Mode: mode})
			c.warned(resp)
			return resp.GetServer(), err
		})
	}
	def.Flags().StringVar(&dgroup, "group", "", "agent group")
	def.Flags().StringVar(&dserver, "server", "", "MCP server name")
	def.Flags().Int32Var(&dapprovals, "approvals", 0, "distinct approvals a held call needs (0 = the defaults)")
	def.Flags().StringVar(&dmode, "mode", "", "enforce, audit or warn (unset: mcp.call's mode)")
	required(def, "group", "server", "effect")
	servers := noun("servers", "A group's guarded MCP servers", "  ncl mcp servers list --group ag_4888a21379a5cf01", slist, def)

	var tgroup, tserver string
	var tLimit int32
	tlist := &cobra.Command{
		Use: "list", Short: "List a server's tools with the effect a call gets and where it comes from",
		Example: "  ncl mcp tools list --group ag_4888a21379a5cf01 --server fs", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&tgroup)
			return a.listPages(cmd, &guardv1.McpToolInfo{}, tLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListMcpTools(ctx, &guardv1.ListMcpToolsRequest{Group: tgroup, Server: tserver, Limit: size, PageToken: token})
				return render.Msgs(resp.GetTools()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(tlist, &tLimit)
	tlist.Flags().StringVar(&tgroup, "group", "", "agent group")
	tlist.Flags().StringVar(&tserver, "server", "", "MCP server name")
	required(tlist, "group", "server")

	var sg, ss, st, smode string
	var sapprovals int32
	set := &cobra.Command{
		Use: "set", Short: "Set one tool's effect: allow, hold or deny",
		Long: `Set the effect every call of the tool gets: allow runs it, hold waits for
an approval of exactly that call (server, tool and arguments), deny refuses
it and leaves it out of the agent's tool list. --effect none removes the
setting (the server's default applies again). A tool no runner has listed
yet may be set ahead. --approvals asks a quorum of distinct approvers;
--mode audit or warn lets calls run while logging what enforce would do.`,
		Example: "  ncl mcp tools set --group ag_4888a21379a5cf01 --server fs --tool read_file --effect allow\n" +
			"  ncl mcp tools set --group ag_4888a21379a5cf01 --server payments --tool refund --effect hold --approvals 2", Args: none,
	}
	var seffect string
	set.Flags().StringVar(&seffect, "effect", "", "allow, hold, deny, or none (remove the setting)")
	set.RunE = func(cmd *cobra.Command, _ []string) error {
		mode, err := parseMode(smode)
		if err != nil {
			return err
		}
		effect, err := parseMCPEffect(seffect)
		if err != nil {
			return err
		}
		a.groupArgs(&sg)
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.SetMcpTool(ctx, &guardv1.SetMcpToolRequest{Group: sg, Server: ss, Tool: st,
				Effect: effect, Approvals: sapprovals, Mode: mode})
			c.warned(resp)
			return resp.GetTool(), err
		})
	}
	set.Flags().StringVar(&sg, "group", "", "agent group")
	set.Flags().StringVar(&ss, "server", "", "MCP server name")
	set.Flags().StringVar(&st, "tool", "", "tool name")
	set.Flags().Int32Var(&sapprovals, "approvals", 0, "distinct approvals a held call needs (0 = the server default's, else the defaults)")
	set.Flags().StringVar(&smode, "mode", "", "enforce, audit or warn (unset: the server default's, else mcp.call's)")
	required(set, "group", "server", "tool", "effect")
	tools := noun("tools", "The tools of a guarded MCP server and their effects", "  ncl mcp tools list --group ag_4888a21379a5cf01 --server fs", tlist, set)

	return noun("mcp", "Guarded MCP servers: every tool call decided by the guard",
		"  ncl mcp servers list --group ag_4888a21379a5cf01\n  ncl mcp tools set --group ag_4888a21379a5cf01 --server fs --tool write_file --effect hold", servers, tools)
}

// parseMCPEffect reads --effect: allow, hold, deny, or none (unset).
func parseMCPEffect(s string) (guardv1.Effect, error) {
	if s == "none" {
		return guardv1.Effect_EFFECT_UNSPECIFIED, nil
	}
	e, err := enumword.Parse[guardv1.Effect](s)
	if err != nil || e == guardv1.Effect_EFFECT_UNSPECIFIED {
		return 0, usagef("--effect %q: want allow, hold, deny or none", s)
	}
	return e, nil
}
