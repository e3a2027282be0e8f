package mcpface

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/proto/retry"
)

// The tools clawguard-mcp offers: the runner's delivery actions and guarded
// MCP tools, kept up to date (Refresh), and a call of one through the gateway.

// refreshUntilLoaded retries Refresh with back-off until it succeeds once
// (one such loop at a time).
func (f *Face) refreshUntilLoaded(ctx context.Context) {
	if !f.retrying.CompareAndSwap(false, true) {
		return
	}
	defer f.retrying.Store(false)
	delays := retry.Exponential(500*time.Millisecond, 30*time.Second)
	for {
		t := time.NewTimer(delays.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f.Refresh(rctx)
		cancel()
		if err == nil {
			return
		}
		f.log.Debug("clawguard-mcp: refresh tools", "err", err)
	}
}

// Refresh reads the runner's actions and guarded tools and offers them,
// adding, replacing and removing tools as they changed (the SDK tells the
// host with notifications/tools/list_changed).
func (f *Face) Refresh(ctx context.Context) error {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	acts, err := f.cfg.Gateway.ListActions(ctx, &agentv1.ListActionsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("list actions: %w", err)
	}
	// The guarded tools: when they cannot be listed now, the delivery
	// actions are still brought up to date and the guarded tools offered
	// so far stay; the error makes the caller try again.
	var tools []*agentv1.McpTool
	var toolsErr error
	switch lt, err := f.cfg.Gateway.ListTools(ctx, &agentv1.ListToolsRequest{}, grpc.WaitForReady(true)); {
	case status.Code(err) == codes.Unimplemented:
		// A runner without guarded MCP servers.
	case err != nil:
		toolsErr = fmt.Errorf("list guarded MCP tools: %w", err)
	default:
		tools = lt.GetTools()
	}
	m := f.menu(acts.GetActions(), tools)
	ok, more := offer(m.cands, builtins)
	f.update(m, ok, toolsErr == nil)
	f.tell(append(m.refused, more...))
	return toolsErr
}

// menu is what the runner offers, as MCP tools: their definitions and
// handlers by name, the candidates for a name, and what cannot be offered.
type menu struct {
	defs    map[string]toolDef
	cands   []candidate
	refused []string
}

type toolDef struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
	guarded bool // a guarded MCP server's tool (not a delivery action)
}

// menu builds the tools of the delivery actions (but mcp_call, offered per
// guarded tool) and of the guarded MCP tools.
func (f *Face) menu(acts []*agentv1.ActionSpec, tools []*agentv1.McpTool) menu {
	m := menu{defs: map[string]toolDef{}}
	add := func(name, origin, schemaJSON string, def func(schema json.RawMessage) toolDef) {
		schema, err := inputSchema(schemaJSON)
		if err != nil {
			m.refused = append(m.refused, origin+" is not offered: "+err.Error())
			return
		}
		m.cands = append(m.cands, candidate{name: name, origin: origin})
		m.defs[name] = def(schema)
	}
	for _, a := range acts {
		if a.GetName() == MCPCall {
			continue
		}
		add(a.GetName(), "delivery action "+quote(a.GetName()), a.GetInputSchemaJson(), func(schema json.RawMessage) toolDef {
			return toolDef{tool: &mcp.Tool{Name: a.GetName(), Description: a.GetDescription(), InputSchema: schema},
				handler: f.actionTool(a.GetName())}
		})
	}
	for _, t := range tools {
		name := guardedToolName(t.GetServer(), t.GetTool())
		add(name, fmt.Sprintf("tool %q of MCP server %q", t.GetTool(), t.GetServer()), t.GetInputSchemaJson(), func(schema json.RawMessage) toolDef {
			desc := t.GetDescription()
			if t.GetEffect() != "allow" {
				desc += " (Clawguard: calls to it may be held for approval.)"
			}
			return toolDef{tool: &mcp.Tool{Name: name, Title: t.GetServer() + ": " + t.GetTool(), Description: strings.TrimSpace(desc), InputSchema: schema},
				handler: f.guardedTool(name, t.GetServer(), t.GetTool()), guarded: true}
		})
	}
	return m
}

// update offers the tools named ok and removes the others offered so far
// — but guarded tools stay when they could not be listed (toolsListed).
func (f *Face) update(m menu, ok map[string]bool, toolsListed bool) {
	var gone []string
	for name, o := range f.offered {
		if !ok[name] && (!o.guarded || toolsListed) {
			gone = append(gone, name)
			delete(f.offered, name)
		}
	}
	if len(gone) > 0 {
		f.server.RemoveTools(gone...)
	}
	for name := range ok {
		d := m.defs[name]
		o := offeredTool{digest: toolDigest(d.tool), guarded: d.guarded}
		if f.offered[name] == o {
			continue
		}
		f.offered[name] = o
		f.server.AddTool(d.tool, d.handler)
	}
}

// tell says, once each, what could not be offered: in the log and to the
// model, in its inbox.
func (f *Face) tell(refused []string) {
	for _, r := range refused {
		if !f.told[r] {
			f.told[r] = true
			f.log.Warn("clawguard-mcp: " + r)
			f.inbox.local(r)
		}
	}
}

// inputSchema checks a schema is a JSON object of type object (what MCP
// requires of an input schema) and keeps it as it came.
func inputSchema(text string) (json.RawMessage, error) {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("its input schema is not a JSON object: %v", err)
	}
	if m["type"] != "object" {
		return nil, fmt.Errorf("its input schema's type is %v, not object", m["type"])
	}
	return json.RawMessage(text), nil
}

func toolDigest(t *mcp.Tool) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (f *Face) newRequestID() string {
	return f.prefix + fmt.Sprint(f.seq.Add(1))
}

// actionTool is a delivery action's tool: its arguments are the payload.
func (f *Face) actionTool(action string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := arguments(req)
		if err != nil {
			return errorResult("%s not run: %v", action, err), nil
		}
		return f.send(ctx, action, action, args, false), nil
	}
}

// guardedTool is a guarded MCP server's tool, called through mcp_call.
func (f *Face) guardedTool(name, server, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := arguments(req)
		if err != nil {
			return errorResult("%s not run: %v", name, err), nil
		}
		return f.send(ctx, name, MCPCall, map[string]any{"server": server, "tool": tool, "arguments": args}, true), nil
	}
}

func arguments(req *mcp.CallToolRequest) (map[string]any, error) {
	args := map[string]any{}
	if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("the arguments are not a JSON object: %v", err)
		}
	}
	return args, nil
}

// send runs one action through the gateway and says what happened.
func (f *Face) send(ctx context.Context, tool, action string, payload map[string]any, passThrough bool) *mcp.CallToolResult {
	p, err := structpb.NewStruct(payload)
	if err != nil {
		return errorResult("%s not run: %v", tool, err)
	}
	id := f.newRequestID()
	f.inbox.begin(id)
	cctx, cancel := context.WithTimeout(ctx, f.cfg.CallWait)
	defer cancel()
	resp, err := f.cfg.Gateway.Send(cctx, &agentv1.SendRequest{RequestId: id, Action: action, Payload: p, ResultAsJson: passThrough}, grpc.WaitForReady(true))
	if err != nil {
		f.inbox.unanswered(id)
		switch status.Code(err) {
		case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable:
			// It may have reached the runner, which runs it to the end.
			return pendingResult(tool, id, err)
		}
		return errorResult("%s not run: the runner refused the call: %v", tool, status.Convert(err).Message())
	}
	if err := f.inbox.answered(id); err != nil {
		f.log.Warn("clawguard-mcp: mark an answered call's notices read", "err", err)
	}
	return toolResult(tool, id, resp, passThrough)
}
