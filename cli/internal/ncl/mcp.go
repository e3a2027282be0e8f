package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
	servers := a.mcpServersCmd()
	tools := a.mcpToolsCmd()
	return noun("mcp", "Guarded MCP servers: every tool call decided by the guard",
		"  ncl mcp servers list --group research\n  ncl mcp tools set --group research --server fs --tool write_file --effect hold", servers, tools)
}

// mcpToolsCmd is ncl mcp tools: the tools of a guarded MCP server and their effects.
func (a *app) mcpToolsCmd() *cobra.Command {
	var tgroup, tserver string
	var tLimit int32
	tlist := &cobra.Command{
		Use: "list", Short: "List a server's tools with the effect a call gets and where it comes from",
		Example: "  ncl mcp tools list --group research --server fs", Args: none,
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
		Example: "  ncl mcp tools set --group research --server fs --tool read_file --effect allow\n" +
			"  ncl mcp tools set --group research --server payments --tool refund --effect hold --approvals 2", Args: none,
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
	set.Flags().StringVar(&smode, "mode", "", "enforce, audit, warn or inherit (the default: the server default's, else mcp.call's)")
	required(set, "group", "server", "tool", "effect")
	tools := noun("tools", "The tools of a guarded MCP server and their effects", "  ncl mcp tools list --group research --server fs", tlist, set)
	return tools
}

// mcpServersCmd is ncl mcp servers: a group's guarded MCP servers and their defaults.
func (a *app) mcpServersCmd() *cobra.Command {
	var sgroup string
	var sLimit int32
	slist := &cobra.Command{
		Use: "list", Short: "List a group's guarded MCP servers with their defaults and state",
		Example: "  ncl mcp servers list --group research", Args: none,
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
		Example: "  ncl mcp servers set-default --group research --server github --effect deny", Args: none,
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
	def.Flags().StringVar(&dmode, "mode", "", "enforce, audit, warn or inherit (the default: mcp.call's mode)")
	required(def, "group", "server", "effect")
	servers := noun("servers", "A group's guarded MCP servers", "  ncl mcp servers list --group research", slist, def)
	return servers
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

// mcpViews are how a group's guarded MCP servers and their tools print.
var mcpViews = []render.View{
	render.For[*guardv1.McpServerInfo](render.View{
		Cols: []render.Col{
			render.C("SERVER", (*guardv1.McpServerInfo).GetName),
			render.C("COMMAND", func(m *guardv1.McpServerInfo) string {
				return strings.TrimSpace(m.GetCommand() + " " + strings.Join(m.GetArgs(), " "))
			}),
			render.C("IMAGE", func(m *guardv1.McpServerInfo) string { return render.OrDash(m.GetImage()) }),
			render.C("DEFAULT", func(m *guardv1.McpServerInfo) string {
				if m.GetDefaultEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
					return "hold (unset)"
				}
				return enumword.String(m.GetDefaultEffect())
			}),
			render.C("APPROVALS", func(m *guardv1.McpServerInfo) string { return fmt.Sprint(max(m.GetApprovals(), 1)) }),
			render.C("MODE", func(m *guardv1.McpServerInfo) string { return render.ModeWord(m.GetMode(), "inherit") }),
			render.C("STATUS", func(m *guardv1.McpServerInfo) string {
				if len(m.GetRunners()) == 0 {
					return "not started"
				}
				var parts []string
				for _, r := range m.GetRunners() {
					p := r.GetRunnerId() + ": " + r.GetState()
					if r.GetState() == "running" {
						p += fmt.Sprintf(" (%d tools)", r.GetTools())
					}
					if r.GetError() != "" {
						p += " — " + r.GetError()
					}
					parts = append(parts, p)
				}
				return strings.Join(parts, "; ")
			}),
		},
		ID: render.IDOf((*guardv1.McpServerInfo).GetName),
	}),
	render.For[*guardv1.McpToolInfo](render.View{
		Cols: []render.Col{
			render.C("TOOL", (*guardv1.McpToolInfo).GetTool),
			render.C("EFFECT", func(m *guardv1.McpToolInfo) string { return enumword.String(m.GetEffect()) }),
			render.C("FROM", func(m *guardv1.McpToolInfo) string {
				return map[guardv1.McpEffectSource]string{
					guardv1.McpEffectSource_MCP_EFFECT_SOURCE_TOOL:           "tool setting",
					guardv1.McpEffectSource_MCP_EFFECT_SOURCE_SERVER_DEFAULT: "server default",
					guardv1.McpEffectSource_MCP_EFFECT_SOURCE_BUILT_IN:       "unset (hold)",
				}[m.GetSource()]
			}),
			render.C("APPROVALS", func(m *guardv1.McpToolInfo) string { return fmt.Sprint(max(m.GetApprovals(), 1)) }),
			render.C("MODE", func(m *guardv1.McpToolInfo) string { return render.ModeWord(m.GetMode(), "inherit") }),
			render.C("SEEN", func(m *guardv1.McpToolInfo) string {
				if m.GetLastSeen() == nil {
					return "never (set ahead)"
				}
				return m.GetLastSeen().AsTime().UTC().Format("2006-01-02 15:04Z")
			}),
			render.C("DESCRIPTION", (*guardv1.McpToolInfo).GetDescription),
		},
		ID: render.IDOf((*guardv1.McpToolInfo).GetTool),
	}),
}

// The guarded MCP servers' settings in the document: each server's default
// for the tools nobody set (ncl mcp servers set-default) and each tool's own
// setting (ncl mcp tools set), under the server in its group.

// mcpSettingSpec is one setting: effect allow, hold or deny; its holds'
// quorum (0: the defaults) and mode ("": mcp.call's).
type mcpSettingSpec struct {
	Effect    string `yaml:"effect"`
	Approvals int32  `yaml:"approvals,omitempty"`
	Mode      string `yaml:"mode,omitempty"`
}

// checkTools refuses a tool listed twice under one server.
func (m mcpServerSpec) checkTools(group string) error {
	seen := map[string]bool{}
	for _, t := range m.Tools {
		if t.Tool == "" || seen[t.Tool] {
			return fmt.Errorf("mcp server %s of group %s: tool %q is empty or listed twice", m.Name, group, t.Tool)
		}
		seen[t.Tool] = true
	}
	return nil
}

// mcpToolSpec is a tool's own setting.
type mcpToolSpec struct {
	Tool           string `yaml:"tool"`
	mcpSettingSpec `yaml:",inline"`
}

func (s mcpSettingSpec) words() string {
	w := s.Effect
	if s.Approvals > 0 {
		w += fmt.Sprintf(", %d approvals", s.Approvals)
	}
	if s.Mode != "" {
		w += ", mode " + s.Mode
	}
	return w
}

func settingWords(s *mcpSettingSpec) string {
	if s == nil {
		return "none"
	}
	return s.words()
}

// request is the setting as the API takes it (nil: none).
func (s *mcpSettingSpec) request() (guardv1.Effect, int32, guardv1.EnforcementMode, error) {
	if s == nil {
		return guardv1.Effect_EFFECT_UNSPECIFIED, 0, 0, nil
	}
	e, err := parseMCPEffect(s.Effect)
	if err == nil && e == guardv1.Effect_EFFECT_UNSPECIFIED {
		err = fmt.Errorf("effect %q: want allow, hold or deny", s.Effect)
	}
	if err != nil {
		return 0, 0, 0, err
	}
	mode, err := parseMode(s.Mode)
	return e, s.Approvals, mode, err
}

// readMCPSettings fills in the settings of every MCP server of g (whose
// id is id).
func readMCPSettings(ctx context.Context, c *clients, id string, g *groupSpec) error {
	if len(g.MCPServers) == 0 {
		return nil
	}
	servers, err := pages(ctx, c, 0, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListMcpServers(ctx, &guardv1.ListMcpServersRequest{Group: id, Limit: size, PageToken: token})
		return msgs(r.GetServers()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read the MCP servers of %s: %w", g.Name, err)
	}
	for _, m := range servers {
		info := m.(*guardv1.McpServerInfo)
		i := slices.IndexFunc(g.MCPServers, func(s mcpServerSpec) bool { return s.Name == info.GetName() })
		if i < 0 {
			continue
		}
		srv := &g.MCPServers[i]
		if info.GetDefaultEffect() != guardv1.Effect_EFFECT_UNSPECIFIED {
			srv.Default = &mcpSettingSpec{Effect: enumword.String(info.GetDefaultEffect()), Approvals: info.GetApprovals(), Mode: enumword.String(info.GetMode())}
		}
		tools, err := pages(ctx, c, 0, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			r, err := c.reg.ListMcpTools(ctx, &guardv1.ListMcpToolsRequest{Group: id, Server: srv.Name, Limit: size, PageToken: token})
			return msgs(r.GetTools()), r.GetNextPageToken(), err
		})
		if err != nil {
			return fmt.Errorf("read the tools of MCP server %s of %s: %w", srv.Name, g.Name, err)
		}
		for _, m := range tools {
			t := m.(*guardv1.McpToolInfo)
			if t.GetSource() != guardv1.McpEffectSource_MCP_EFFECT_SOURCE_TOOL {
				continue // the server's default or the built-in hold: not a setting of its own
			}
			srv.Tools = append(srv.Tools, mcpToolSpec{Tool: t.GetTool(), mcpSettingSpec: mcpSettingSpec{
				Effect: enumword.String(t.GetToolEffect()), Approvals: t.GetApprovals(), Mode: enumword.String(t.GetMode())}})
		}
		slices.SortFunc(srv.Tools, func(a, b mcpToolSpec) int { return strings.Compare(a.Tool, b.Tool) })
	}
	return nil
}

// planMCPSettings lists the setting changes of want's MCP servers (after
// the servers themselves exist) and the settings want drops, which are
// deletions (back to the defaults); a server want drops takes its settings
// with it.
func planMCPSettings(cur, want groupSpec) (changes, dels []change) {
	group := want.Name
	for _, m := range want.MCPServers {
		var old mcpServerSpec
		if i := slices.IndexFunc(cur.MCPServers, func(o mcpServerSpec) bool { return o.Name == m.Name }); i >= 0 {
			old = cur.MCPServers[i]
		}
		if !sameSetting(old.Default, m.Default) {
			op := byte('~')
			if old.Default == nil {
				op = '+'
			}
			what := fmt.Sprintf("mcp server %s of group %s: default %s → %s", m.Name, group, settingWords(old.Default), settingWords(m.Default))
			ch := change{op, what, setDefault(group, m.Name, m.Default)}
			if m.Default == nil {
				dels = append(dels, ch)
			} else {
				changes = append(changes, ch)
			}
		}
		for _, t := range m.Tools {
			i := slices.IndexFunc(old.Tools, func(o mcpToolSpec) bool { return o.Tool == t.Tool })
			if i >= 0 && old.Tools[i] == t {
				continue
			}
			op, was := byte('+'), ""
			if i >= 0 {
				op, was = '~', old.Tools[i].words()+" → "
			}
			changes = append(changes, change{op, fmt.Sprintf("mcp tool %s.%s of group %s: %s%s", m.Name, t.Tool, group, was, t.words()),
				setTool(group, m.Name, t.Tool, &t.mcpSettingSpec)})
		}
		for _, o := range old.Tools {
			if !slices.ContainsFunc(m.Tools, func(t mcpToolSpec) bool { return t.Tool == o.Tool }) {
				dels = append(dels, change{'-', fmt.Sprintf("mcp tool %s.%s of group %s setting (%s)", m.Name, o.Tool, group, o.words()),
					setTool(group, m.Name, o.Tool, nil)})
			}
		}
	}
	return changes, dels
}

func sameSetting(a, b *mcpSettingSpec) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func setDefault(group, server string, s *mcpSettingSpec) func(ctx context.Context, c *clients, book groupBook) error {
	return func(ctx context.Context, c *clients, book groupBook) error {
		effect, approvals, mode, err := s.request()
		if err != nil {
			return fmt.Errorf("mcp server %s of group %s: default: %w", server, group, err)
		}
		resp, err := c.reg.SetMcpServerDefault(ctx, &guardv1.SetMcpServerDefaultRequest{Group: idOr(book, group), Server: server,
			Effect: effect, Approvals: approvals, Mode: mode})
		c.warned(resp)
		return err
	}
}

func setTool(group, server, tool string, s *mcpSettingSpec) func(ctx context.Context, c *clients, book groupBook) error {
	return func(ctx context.Context, c *clients, book groupBook) error {
		effect, approvals, mode, err := s.request()
		if err != nil {
			return fmt.Errorf("mcp tool %s.%s of group %s: %w", server, tool, group, err)
		}
		resp, err := c.reg.SetMcpTool(ctx, &guardv1.SetMcpToolRequest{Group: idOr(book, group), Server: server, Tool: tool,
			Effect: effect, Approvals: approvals, Mode: mode})
		c.warned(resp)
		return err
	}
}
