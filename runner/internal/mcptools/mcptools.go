// Package mcptools is the agent's side of the guarded MCP servers: the
// delivery action mcp_call (a tools/call the guard decides as mcp.call
// before mcphost forwards it) and the session's tool list (the gateway's
// ListTools). A held call answers at once; its approved replay is applied
// once (Registry.ApplyAction records this runner process's claim on the
// hold), run once, and its result put into the session's durable inbox.
package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/mcphost"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Deps is what the tool calls need.
type Deps struct {
	Host     *mcphost.Host
	Registry guardv1.RegistryClient // GetSessionConfig, ReportMcpTools, ApplyAction (runner token)
	// Deliver puts an item into the session's durable inbox under id (an
	// id it has seen is not added again).
	Deliver func(s delivery.Session, id string, n *agentv1.Notice) error
	// Claim is this runner process's claim on an approved call (unique per
	// process: a restarted runner's claim differs).
	Claim string
	// Image is the docker image of a server that names none: the group's
	// agent image.
	Image func(g *guardv1.Group) string
	Log   *slog.Logger
}

// Tools runs the tool calls and lists the tools.
type Tools struct {
	d    Deps
	runs sync.Map // hold id → *run: an approved call run (or running) by this process
	// envs: group id → its servers' env values, scrubbed from what is
	// reported of a server (its failure may quote its environment).
	envs sync.Map
}

// run is one approved call in this process: its result is kept until the
// inbox has it, so a retried push delivers it without running it again.
type run struct {
	mu     sync.Mutex
	notice *agentv1.Notice
}

// New returns the tool calls.
func New(d Deps) *Tools {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Tools{d: d}
}

// Action is the mcp_call delivery action.
func (t *Tools) Action() delivery.Action {
	return delivery.Action{
		Name: mcpcall.DeliveryAction, CatalogAction: mcpcall.CatalogAction, ApprovalKind: mcpcall.ApprovalKind,
		Precheck: func(_ delivery.Session, p *structpb.Struct) error { _, _, _, err := parse(p); return err },
		Resource: func(_ delivery.Session, p *structpb.Struct) map[string]string {
			server, tool, args, _ := parse(p)
			d, _ := mcpcall.Digest(server, tool, args)
			return mcpcall.Resource(server, tool, d)
		},
		Card: card,
		Run:  t.run,
	}
}

// parse reads {server, tool, arguments} (arguments optional, an object).
func parse(p *structpb.Struct) (server, tool string, args map[string]any, err error) {
	server, tool = delivery.String(p, mcpcall.KeyServer), delivery.String(p, mcpcall.KeyTool)
	switch {
	case !mcpcall.ValidServer(server):
		return "", "", nil, fmt.Errorf("mcp_call failed: server %q is not an MCP server name", server)
	case !mcpcall.ValidTool(tool):
		return "", "", nil, fmt.Errorf("mcp_call failed: tool %q is not a tool name", tool)
	}
	args = map[string]any{}
	if v, ok := p.GetFields()[mcpcall.KeyArguments]; ok {
		if _, null := v.GetKind().(*structpb.Value_NullValue); !null {
			s := v.GetStructValue()
			if s == nil {
				return "", "", nil, errors.New("mcp_call failed: arguments must be an object")
			}
			args = s.AsMap()
		}
	}
	for k := range p.GetFields() {
		if k != mcpcall.KeyServer && k != mcpcall.KeyTool && k != mcpcall.KeyArguments {
			return "", "", nil, fmt.Errorf("mcp_call failed: unknown payload key %q (server, tool, arguments)", k)
		}
	}
	return server, tool, args, nil
}

// card shows the approver the server, the tool and the exact arguments.
func card(s delivery.Session, p *structpb.Struct) (string, string) {
	server, tool, args, _ := parse(p)
	b, _ := json.MarshalIndent(args, "", "  ")
	q := fmt.Sprintf("Agent group %s wants to call tool %s of MCP server %s with these arguments (exactly these run):\n\n%s",
		s.GroupID, tool, server, clip(string(b), 3000))
	return "MCP tool call: " + server + " / " + tool, q
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + fmt.Sprintf("… [%d more bytes not shown: read the hold's payload before approving]", len(s)-n)
	}
	return s
}

func (t *Tools) run(ctx context.Context, c delivery.Call) delivery.Outcome {
	server, tool, args, err := parse(c.Payload)
	if err != nil {
		return delivery.Failed("%v", err)
	}
	if c.Replay {
		return t.replay(ctx, c, server, tool, args)
	}
	if !t.d.Host.Configured(c.Session.GroupID) {
		if err := t.refresh(ctx, c.Session); err != nil {
			return delivery.Failed("mcp_call %s/%s allowed but not run: %v", server, tool, err)
		}
	}
	res, err := t.d.Host.Call(ctx, c.Session.GroupID, server, tool, args)
	if errors.Is(err, mcphost.ErrNoServer) {
		// The guard found the server in the group's config; this runner's
		// copy of it is older (the restart push that re-reads it is on its way).
		if err = t.refresh(ctx, c.Session); err == nil {
			res, err = t.d.Host.Call(ctx, c.Session.GroupID, server, tool, args)
		}
	}
	if err != nil {
		return delivery.Failed("mcp_call %s/%s allowed but not run: %v", server, tool, err)
	}
	st, err := resultStruct(res)
	if err != nil {
		return delivery.Failed("mcp_call %s/%s ran but its result could not be read: %v", server, tool, err)
	}
	out := delivery.Done(st, fmt.Sprintf("%s/%s ran", server, tool))
	out.Told = true // the answer carries the result
	return out
}

// replay runs an approved call once: the apply records this process's
// claim on the hold; a claim of another process (one that died mid-call)
// means it may have run, so it is not run again and the agent is told.
func (t *Tools) replay(ctx context.Context, c delivery.Call, server, tool string, args map[string]any) delivery.Outcome {
	hold := c.HoldID
	v, _ := t.runs.LoadOrStore(hold, &run{})
	r := v.(*run)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notice != nil {
		return t.deliver(c, hold, r.notice)
	}
	if err := t.refresh(ctx, c.Session); err != nil {
		out := delivery.Failed("approved mcp_call %s/%s not run yet: %v", server, tool, err)
		out.Undecided = true
		return out
	}
	p := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range c.Payload.GetFields() {
		p.Fields[k] = v
	}
	p.Fields["claim"] = structpb.NewStringValue(t.d.Claim)
	res, err := t.d.Registry.ApplyAction(ctx, &guardv1.ApplyActionRequest{DecisionId: c.DecisionID, SessionId: c.Session.ID,
		Action: mcpcall.CatalogAction, Payload: p, Resource: c.Resource}, grpc.WaitForReady(true))
	if err != nil {
		out := delivery.Failed("approved mcp_call %s/%s not run: %v", server, tool, err)
		out.Undecided = delivery.Transient(err)
		// The session moved: its new host replays it (a denial on the live
		// re-check is PermissionDenied too, and is told).
		out.NotHosted = status.Code(err) == codes.PermissionDenied && strings.Contains(status.Convert(err).Message(), "does not host")
		return out
	}
	n := &agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_RESULT, HoldId: hold, At: timestamppb.Now()}
	if claim := res.GetResult().AsMap()["claim"]; claim != t.d.Claim {
		n.Kind = agentv1.NoticeKind_NOTICE_KIND_FAILED
		n.Text = fmt.Sprintf("approved mcp_call %s/%s (hold %s) was not run again: an earlier runner process claimed it and stopped "+
			"before its result was delivered; it may or may not have run. Check its effect before asking again.", server, tool, hold)
		r.notice = n
		return t.deliver(c, hold, n)
	}
	callRes, err := t.d.Host.Call(ctx, c.Session.GroupID, server, tool, args)
	if err != nil {
		n.Kind = agentv1.NoticeKind_NOTICE_KIND_FAILED
		n.Text = fmt.Sprintf("approved mcp_call %s/%s (hold %s) did not run: %v", server, tool, hold, err)
	} else if n.Result, err = resultStruct(callRes); err != nil {
		n.Text = fmt.Sprintf("approved mcp_call %s/%s (hold %s) ran; its result could not be read: %v", server, tool, hold, err)
	} else {
		b, _ := json.Marshal(n.Result.AsMap())
		n.Text = fmt.Sprintf("approved mcp_call %s/%s (hold %s) ran; result: %s", server, tool, hold, clip(string(b), 4000))
	}
	r.notice = n
	return t.deliver(c, hold, n)
}

// deliver puts an approved call's outcome into the durable inbox, once
// (by hold id); a full inbox is tried again with the push.
func (t *Tools) deliver(c delivery.Call, hold string, n *agentv1.Notice) delivery.Outcome {
	if err := t.d.Deliver(c.Session, "mcp-result-"+hold, n); err != nil {
		out := delivery.Failed("approved mcp_call result not delivered yet: %v", err)
		out.Undecided = true
		return out
	}
	t.runs.Delete(hold)
	var out delivery.Outcome
	if n.Kind == agentv1.NoticeKind_NOTICE_KIND_RESULT {
		out = delivery.Done(n.Result, n.Text)
	} else {
		out = delivery.Failed("%s", n.Text)
	}
	out.Told = true
	return out
}

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
// ones the operator denied. Each server's tools are reported to the
// server, whose answer is their effects.
func (t *Tools) List(ctx context.Context, s delivery.Session) ([]*agentv1.McpTool, error) {
	if err := t.refresh(ctx, s); err != nil {
		return nil, err
	}
	var out []*agentv1.McpTool
	for _, server := range t.d.Host.Servers(s.GroupID) {
		tools, err := t.d.Host.Tools(ctx, s.GroupID, server)
		rep := &guardv1.ReportMcpToolsRequest{SessionId: s.ID, Server: server, State: "running"}
		if err != nil {
			err = errors.New(t.scrubbed(s.GroupID, err.Error()))
			rep.State, rep.Error = "failed", clip(err.Error(), 4000)
		}
		for _, tl := range tools {
			if mcpcall.ValidTool(tl.Name) {
				rep.Tools = append(rep.Tools, &guardv1.ReportedMcpTool{Name: tl.Name, Description: clip(tl.Description, 8000)})
			}
		}
		resp, rerr := t.d.Registry.ReportMcpTools(ctx, rep)
		if rerr != nil {
			return nil, fmt.Errorf("effects of MCP server %s: %w", server, rerr)
		}
		if err != nil {
			t.d.Log.Warn("guarded MCP server not listed", "session", s.ID, "server", server, "err", err)
			continue
		}
		byName := map[string]*mcp.Tool{}
		for _, tl := range tools {
			byName[tl.Name] = tl
		}
		for _, info := range resp.GetTools() {
			tl := byName[info.GetTool()]
			if tl == nil || info.GetEffect() == guardv1.Effect_EFFECT_DENY || info.GetEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
				continue
			}
			schema, _ := json.Marshal(tl.InputSchema)
			out = append(out, &agentv1.McpTool{Server: server, Tool: tl.Name, Description: tl.Description,
				InputSchemaJson: string(schema), Effect: effectWord(info.GetToolEffect())})
		}
	}
	return out, nil
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

// resultStruct is a CallToolResult as JSON in a Struct.
func resultStruct(res *mcp.CallToolResult) (*structpb.Struct, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	st := &structpb.Struct{}
	if err := st.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return st, nil
}
