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
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/mcphost"
)

// Deps is what the tool calls need.
type Deps struct {
	Host     *mcphost.Host
	Registry guardv1.RegistryClient // GetSessionConfig, ReportMcpTools (runner token)
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

	mu     sync.Mutex
	listed map[string]listing // "<group>/<server>" → its tools as last reported
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
	return &Tools{d: d, listed: map[string]listing{}}
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
		// An allowed call runs at once; an approved one's replay is applied
		// first: the server records this process's claim on the hold.
		ApplyReplayOnly: true,
		Stamp:           func(delivery.Call) map[string]string { return map[string]string{mcpcall.KeyClaim: t.d.Claim} },
		Run:             t.run,
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
	res, err := t.call(ctx, c.Session, server, tool, args)
	if err != nil {
		return delivery.Failed("mcp_call %s/%s allowed but not run: %v", server, tool, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return delivery.Failed("mcp_call %s/%s ran but its result could not be read: %v", server, tool, err)
	}
	out := delivery.Done(nil, fmt.Sprintf("%s/%s ran", server, tool))
	// As JSON: clawguard-mcp passes it on as it came; anyone else gets it
	// as a Struct from the gateway.
	out.ResultJSON = b
	out.Told = true // the answer carries the result
	return out
}

// call calls the tool on the group's server. A server the guard found in
// the group's config that this runner's copy lacks (the restart push that
// brings the new config is on its way) is looked up once more.
func (t *Tools) call(ctx context.Context, s delivery.Session, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	res, err := t.d.Host.Call(ctx, s.GroupID, server, tool, args)
	if errors.Is(err, mcphost.ErrNoServer) {
		if err = t.refresh(ctx, s); err == nil {
			res, err = t.d.Host.Call(ctx, s.GroupID, server, tool, args)
		}
	}
	return res, err
}

// replay runs an approved call once. The server recorded this process's
// claim on the hold as it applied the replay (c.Applied); a claim of
// another process (one that died mid-call) means it may have run, so it is
// not run again and the agent is told.
func (t *Tools) replay(ctx context.Context, c delivery.Call, server, tool string, args map[string]any) delivery.Outcome {
	hold := c.HoldID
	v, _ := t.runs.LoadOrStore(hold, &run{})
	r := v.(*run)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notice != nil {
		return t.deliver(c, hold, r.notice)
	}
	n := &agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_RESULT, HoldId: hold, At: timestamppb.Now()}
	if claim := c.Applied.GetResult().AsMap()[mcpcall.KeyClaim]; claim != t.d.Claim {
		n.Kind = agentv1.NoticeKind_NOTICE_KIND_FAILED
		n.Text = fmt.Sprintf("approved mcp_call %s/%s (hold %s) was not run again: an earlier runner process claimed it and stopped "+
			"before its result was delivered; it may or may not have run. Check its effect before asking again.", server, tool, hold)
		r.notice = n
		return t.deliver(c, hold, n)
	}
	if !t.d.Host.Configured(c.Session.GroupID) {
		// Claimed and not run: asked again, the server answers the same
		// claim and the call runs then.
		if err := t.refresh(ctx, c.Session); err != nil {
			out := delivery.Failed("approved mcp_call %s/%s not run yet: %v", server, tool, err)
			out.Undecided = true
			return out
		}
	}
	callRes, err := t.call(ctx, c.Session, server, tool, args)
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
