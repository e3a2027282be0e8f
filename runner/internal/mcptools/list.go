package mcptools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// The session's guarded tools, as the agent lists them, and the group's MCP
// servers hosted as its config names them.

// refresh reads the session's group config and hosts its servers.
func (t *Tools) refresh(ctx context.Context, s delivery.Session) error {
	resp, err := t.d.Registry.GetSessionConfig(ctx, &guardv1.GetSessionConfigRequest{SessionId: s.ID})
	if err != nil {
		return fmt.Errorf("read the session's MCP servers: %w", err)
	}
	t.Sync(resp.GetGroup())
	return nil
}

// Sync hosts a group's MCP servers as its config names them.
func (t *Tools) Sync(g *guardv1.Group) {
	if g.GetId() == "" {
		return
	}
	var specs []rt.MCPServerSpec
	var values []string
	for _, m := range g.GetConfig().GetMcpServers() {
		for _, v := range m.GetEnv() {
			values = append(values, v)
		}
		if !mcpcall.ValidServer(m.GetName()) {
			t.d.Log.Warn("MCP server with an invalid name not hosted", "group", g.GetId(), "server", m.GetName())
			continue
		}
		img := m.GetImage()
		if img == "" && t.d.Image != nil {
			img = t.d.Image(g)
		}
		specs = append(specs, rt.MCPServerSpec{Name: m.GetName(), Command: m.GetCommand(), Args: m.GetArgs(), Env: m.GetEnv(), Image: img})
	}
	t.envs.Store(g.GetId(), values)
	t.d.Host.Sync(g.GetId(), specs)
}

// scrubbed is what a server of group reports (an error) without its
// group's env values: they are write-only, and this text is read by the
// group's agents and admins (ncl mcp servers list).
func (t *Tools) scrubbed(group, text string) string {
	values, _ := t.envs.Load(group)
	vs, _ := values.([]string)
	return secret.Scrub(text, vs)
}

// List is the session's guarded tools (the gateway's ListTools): every
// tool of every server of its group, as the server lists it, without the
// ones the operator denied. It is answered from what the runner knows: a
// server's tools are reported to the server (ReportMcpTools, whose answer
// is their effects, kept) only when what the runner sees of it changed —
// its state or its tools — or when the server said the group's settings
// did (Forget); an agent's read is not a write on the server.
func (t *Tools) List(ctx context.Context, s delivery.Session) ([]*agentv1.McpTool, error) {
	if !t.d.Host.Configured(s.GroupID) {
		if err := t.refresh(ctx, s); err != nil {
			return nil, err
		}
	}
	var out []*agentv1.McpTool
	for _, server := range t.d.Host.Servers(s.GroupID) {
		tools, err := t.d.Host.Tools(ctx, s.GroupID, server)
		rep := &guardv1.ReportMcpToolsRequest{SessionId: s.ID, Server: server, State: "running"}
		if err != nil {
			err = errors.New(t.scrubbed(s.GroupID, err.Error()))
			rep.State, rep.Error = "failed", clip(err.Error(), 4000)
			t.d.Log.Warn("guarded MCP server not listed", "session", s.ID, "server", server, "err", err)
		}
		for _, tl := range tools {
			if mcpcall.ValidTool(tl.Name) {
				rep.Tools = append(rep.Tools, &guardv1.ReportedMcpTool{Name: tl.Name, Description: clip(tl.Description, 8000)})
			}
		}
		listed, err := t.effects(ctx, s.GroupID, rep, tools)
		if err != nil {
			return nil, err
		}
		out = append(out, listed...)
	}
	return out, nil
}

// listing is one server's tools as the agent is shown them, and what the
// runner reported to get them (its digest).
type listing struct {
	reported string
	tools    []*agentv1.McpTool
}

// effects is a server's tools with their effects: kept from the last report
// while the report would say the same, else reported and kept.
func (t *Tools) effects(ctx context.Context, group string, rep *guardv1.ReportMcpToolsRequest, tools []*mcp.Tool) ([]*agentv1.McpTool, error) {
	digest := reportDigest(rep)
	key := group + "/" + rep.GetServer()
	t.mu.Lock()
	l, ok := t.listed[key]
	t.mu.Unlock()
	if ok && l.reported == digest {
		return l.tools, nil
	}
	resp, err := t.d.Registry.ReportMcpTools(ctx, rep)
	if err != nil {
		return nil, fmt.Errorf("effects of MCP server %s: %w", rep.GetServer(), err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	var out []*agentv1.McpTool
	for _, info := range resp.GetTools() {
		tl := byName[info.GetTool()]
		if tl == nil || info.GetEffect() == guardv1.Effect_EFFECT_DENY || info.GetEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
			continue
		}
		schema, _ := json.Marshal(tl.InputSchema)
		out = append(out, &agentv1.McpTool{Server: rep.GetServer(), Tool: tl.Name, Description: tl.Description,
			InputSchemaJson: string(schema), Effect: effectWord(info.GetToolEffect())})
	}
	t.mu.Lock()
	t.listed[key] = listing{reported: digest, tools: out}
	t.mu.Unlock()
	return out, nil
}

// Forget drops what the server answered of a group's tools: their settings
// changed (a TOOLS_CHANGED notice from the server), so the next List asks.
func (t *Tools) Forget(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key := range t.listed {
		if strings.HasPrefix(key, group+"/") {
			delete(t.listed, key)
		}
	}
}

// reportDigest is a report's digest, its session left out: what it says
// of the server is what a repeated report would change.
func reportDigest(rep *guardv1.ReportMcpToolsRequest) string {
	r := proto.Clone(rep).(*guardv1.ReportMcpToolsRequest)
	r.SessionId = ""
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func effectWord(e guardv1.Effect) string {
	switch e {
	case guardv1.Effect_EFFECT_ALLOW:
		return mcpcall.EffectAllow
	case guardv1.Effect_EFFECT_HOLD:
		return mcpcall.EffectHold
	}
	return ""
}
