package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
)

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

// setEnv are the env keys whose values the document writes out (set on
// apply), sorted; the others are "<redacted>" references to the values the
// server holds.
func (m mcpServerSpec) setEnv() []string {
	var out []string
	for k, v := range m.Env {
		if v != secret.Redacted {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
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
