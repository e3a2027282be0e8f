// Package mcpface is clawguard-mcp, the agent's MCP server: a stdio MCP
// server inside the agent's container that speaks to the runner only
// through the session's gateway socket (agent.v1.AgentGateway).
//
// It offers every delivery action of the runner (ListActions) as a tool
// whose input schema is the one the runner validates the payload with, and
// every guarded MCP tool the session may call (ListTools) as
// <server>__<tool>, called as the delivery action mcp_call. A tool call is
// one Send: its answer (done, held, denied, failed) is the tool's result at
// once; a held call's outcome comes later through the inbox. The inbox
// (messages, notices, results of approved calls) is offered as the tools
// read_inbox and wait_for_messages, and announced as an update of the
// subscribable resource inbox://pending plus a log message, for hosts that
// act on notifications.
package mcpface

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawguard/clawguard/proto/retry"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// Names clawguard-mcp gives its own things.
const (
	ReadInbox       = "read_inbox"
	WaitForMessages = "wait_for_messages"
	InboxURI        = "inbox://pending"
	// MCPCall is the delivery action a guarded MCP tool is called through;
	// it is offered per tool, not as a tool of its own.
	MCPCall = "mcp_call"
)

// Config is what a Face needs.
type Config struct {
	// Gateway is the session's agent gateway (the runner's unix socket).
	Gateway agentv1.AgentGatewayClient
	// Acker acknowledges inbox items the model was handed (nil: NoAck).
	Acker Acker
	// CallWait bounds how long a tool call waits for the gateway's answer
	// before it answers "no answer yet" (default 30s). A held call answers
	// at once whatever this is.
	CallWait time.Duration
	// MaxWait bounds wait_for_messages (default 5m).
	MaxWait time.Duration
	// Version is reported to the host.
	Version string
	Log     *slog.Logger
}

// Face is one clawguard-mcp server.
type Face struct {
	cfg    Config
	server *mcp.Server
	inbox  *inbox
	log    *slog.Logger
	prefix string
	seq    atomic.Uint64

	refreshMu sync.Mutex
	retrying  atomic.Bool
	offered   map[string]offeredTool
	told      map[string]bool // refusals already told to the model
}

type offeredTool struct {
	digest  string // of its definition: an unchanged tool is not added again
	guarded bool   // a guarded MCP server's tool (not a delivery action)
}

// New builds the server; Run serves it.
func New(cfg Config) *Face {
	if cfg.Acker == nil {
		cfg.Acker = NoAck{}
	}
	if cfg.CallWait <= 0 {
		cfg.CallWait = 30 * time.Second
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	f := &Face{cfg: cfg, log: cfg.Log, prefix: "mcp-" + hex.EncodeToString(b) + "-",
		offered: map[string]offeredTool{}, told: map[string]bool{}}
	f.inbox = newInbox(f.announce)
	// The SDK's own log (every notification sent) is noise on stderr.
	sdkLog := slog.New(slog.DiscardHandler)
	f.server = mcp.NewServer(&mcp.Implementation{Name: "clawguard", Title: "Clawguard", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       sdkLog,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{Subscribe: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI != InboxURI {
				return fmt.Errorf("no resource %q to subscribe to (only %s)", req.Params.URI, InboxURI)
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	f.server.AddResource(&mcp.Resource{URI: InboxURI, Name: "inbox", MIMEType: "application/json",
		Description: "Inbox items not yet read: messages for you and outcomes of your held actions. Reading it does not mark them read; read_inbox does."},
		f.readResource)
	f.server.AddTool(&mcp.Tool{Name: ReadInbox, Description: "Return and mark read every inbox item waiting: messages from people and other agents, and the outcomes of your held actions (approved and run, with the result; rejected; denied).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}, f.readInbox)
	f.server.AddTool(&mcp.Tool{Name: WaitForMessages, Description: fmt.Sprintf("Wait until an inbox item arrives (or timeout_seconds pass, at most %d), then return and mark read what is waiting. Use it to wait for the outcome of a held action.", int(cfg.MaxWait/time.Second)),
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"timeout_seconds":{"type":"number","minimum":0,"maximum":%d,"description":"How long to wait (default 60)"}}}`, int(cfg.MaxWait/time.Second)))},
		f.waitForMessages)
	return f
}

const instructions = `Clawguard guards this agent's privileged actions. Each tool here (besides read_inbox and wait_for_messages) is an action the runner performs only after asking the guard: it runs at once (done), is denied (with the reason), or is held for a human's approval. A held call answers at once with the hold id and who may approve it; do not send it again: its outcome (with the result, once approved and run) arrives later in your inbox. Read the inbox with read_inbox, or call wait_for_messages to wait for it; messages from people and other agents arrive there too.`

// Server is the MCP server (to Run on a transport, or for tests).
func (f *Face) Server() *mcp.Server { return f.server }

var builtins = map[string]bool{ReadInbox: true, WaitForMessages: true}

// Run loads the tools, follows the inbox and serves t until ctx ends or
// the host hangs up.
func (f *Face) Run(ctx context.Context, t mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Tools first, so the first tools/list is whole: many hosts never ask
	// again. A runner that cannot be reached yet gets its tools offered
	// when the inbox stream reaches it (list_changed).
	lctx, lcancel := context.WithTimeout(ctx, 15*time.Second)
	err := f.Refresh(lctx)
	lcancel()
	if err != nil {
		f.log.Warn("clawguard-mcp: tools not loaded yet; trying again", "err", err)
		go f.refreshUntilLoaded(ctx)
	}
	go f.followInbox(ctx)
	return f.server.Run(ctx, t)
}

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

	type def struct {
		tool    *mcp.Tool
		handler mcp.ToolHandler
	}
	defs := map[string]def{}
	guarded := map[string]bool{}
	var cands []candidate
	var refused []string
	for _, a := range acts.GetActions() {
		if a.GetName() == MCPCall {
			continue
		}
		origin := "delivery action " + quote(a.GetName())
		schema, err := inputSchema(a.GetInputSchemaJson())
		if err != nil {
			refused = append(refused, origin+" is not offered: "+err.Error())
			continue
		}
		cands = append(cands, candidate{name: a.GetName(), origin: origin})
		defs[a.GetName()] = def{&mcp.Tool{Name: a.GetName(), Description: a.GetDescription(), InputSchema: schema},
			f.actionTool(a.GetName())}
	}
	for _, t := range tools {
		name := guardedToolName(t.GetServer(), t.GetTool())
		origin := fmt.Sprintf("tool %q of MCP server %q", t.GetTool(), t.GetServer())
		schema, err := inputSchema(t.GetInputSchemaJson())
		if err != nil {
			refused = append(refused, origin+" is not offered: "+err.Error())
			continue
		}
		cands = append(cands, candidate{name: name, origin: origin})
		guarded[name] = true
		desc := t.GetDescription()
		if t.GetEffect() != "allow" {
			desc += " (Clawguard: calls to it may be held for approval.)"
		}
		defs[name] = def{&mcp.Tool{Name: name, Title: t.GetServer() + ": " + t.GetTool(), Description: strings.TrimSpace(desc), InputSchema: schema},
			f.guardedTool(name, t.GetServer(), t.GetTool())}
	}
	ok, more := offer(cands, builtins)
	refused = append(refused, more...)

	var gone []string
	for name, o := range f.offered {
		if !ok[name] && (!o.guarded || toolsErr == nil) {
			gone = append(gone, name)
			delete(f.offered, name)
		}
	}
	if len(gone) > 0 {
		f.server.RemoveTools(gone...)
	}
	for name := range ok {
		d := defs[name]
		o := offeredTool{digest: toolDigest(d.tool), guarded: guarded[name]}
		if f.offered[name] == o {
			continue
		}
		f.offered[name] = o
		f.server.AddTool(d.tool, d.handler)
	}
	for _, r := range refused {
		if !f.told[r] {
			f.told[r] = true
			f.log.Warn("clawguard-mcp: " + r)
			f.inbox.local(r)
		}
	}
	return toolsErr
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
	resp, err := f.cfg.Gateway.Send(cctx, &agentv1.SendRequest{RequestId: id, Action: action, Payload: p}, grpc.WaitForReady(true))
	if err != nil {
		f.inbox.unanswered(id)
		switch status.Code(err) {
		case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable:
			// It may have reached the runner, which runs it to the end.
			return pendingResult(tool, id, err)
		}
		return errorResult("%s not run: the runner refused the call: %v", tool, status.Convert(err).Message())
	}
	f.ack(f.inbox.answered(id))
	return toolResult(tool, id, resp, passThrough)
}

// followInbox reads the session's inbox stream for as long as ctx lives,
// reconnecting (and re-reading the tools: the runner may have restarted)
// when it ends.
func (f *Face) followInbox(ctx context.Context) {
	delays := retry.Exponential(200*time.Millisecond, 5*time.Second)
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := f.Refresh(rctx); err != nil {
				f.log.Debug("clawguard-mcp: refresh tools", "err", err)
			}
			cancel()
		}
		stream, err := f.cfg.Gateway.Inbox(ctx, &agentv1.InboxRequest{}, grpc.WaitForReady(true))
		for err == nil {
			var r *agentv1.InboxResponse
			if r, err = stream.Recv(); err == nil {
				delays.Reset()
				f.take(ctx, r)
			}
		}
		if ctx.Err() != nil {
			return
		}
		d := delays.NextBackOff()
		f.log.Debug("clawguard-mcp: inbox stream ended; reconnecting", "err", err, "in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// take handles one inbox item from the runner.
func (f *Face) take(ctx context.Context, r *agentv1.InboxResponse) {
	id := itemID(r)
	if r.GetNotice().GetKind() == agentv1.NoticeKind_NOTICE_KIND_TOOLS_CHANGED {
		f.inbox.consumed(id)
		f.ack([]string{id})
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := f.Refresh(rctx)
			cancel()
			if err != nil {
				f.log.Warn("clawguard-mcp: refresh tools after tools changed; trying again", "err", err)
				f.refreshUntilLoaded(ctx)
			}
		}()
		return
	}
	if f.inbox.add(id, r) {
		f.ack([]string{id})
	}
}

// ack acknowledges items done with here, in the background (a failed ack
// only means the runner sends them again, and they are dropped again).
func (f *Face) ack(ids []string) {
	ids = remote(ids)
	if len(ids) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.cfg.Acker.Ack(ctx, ids); err != nil {
			f.log.Debug("clawguard-mcp: ack", "err", err)
		}
	}()
}

func remote(ids []string) []string {
	out := ids[:0:0]
	for _, id := range ids {
		if !strings.HasPrefix(id, localPrefix) {
			out = append(out, id)
		}
	}
	return out
}

// handOver acknowledges items given to the model; on failure they stay
// pending (returned again next time).
func (f *Face) handOver(ctx context.Context, items []item) error {
	if ids := remote(ids(items)); len(ids) > 0 {
		if err := f.cfg.Acker.Ack(ctx, ids); err != nil {
			f.inbox.put(items)
			return err
		}
	}
	f.inbox.done(items)
	return nil
}

func (f *Face) readInbox(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	items := f.inbox.take()
	if err := f.handOver(ctx, items); err != nil {
		return errorResult("the inbox could not be read (its items stay waiting): %v", err), nil
	}
	return itemsResult(items, ""), nil
}

func (f *Face) waitForMessages(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		TimeoutSeconds *float64 `json:"timeout_seconds"`
	}
	if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &in); err != nil {
			return errorResult("wait_for_messages: the arguments do not fit its schema: %v", err), nil
		}
	}
	d := 60 * time.Second
	if in.TimeoutSeconds != nil {
		d = time.Duration(*in.TimeoutSeconds * float64(time.Second))
	}
	d = min(max(d, 0), f.cfg.MaxWait)
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	items := f.inbox.wait(wctx)
	if ctx.Err() != nil {
		f.inbox.put(items) // the host gave up: nobody reads this answer
		return nil, ctx.Err()
	}
	if err := f.handOver(ctx, items); err != nil {
		return errorResult("the inbox could not be read (its items stay waiting): %v", err), nil
	}
	if len(items) == 0 {
		return itemsResult(nil, fmt.Sprintf("nothing arrived in %s", d.Round(time.Millisecond))), nil
	}
	return itemsResult(items, ""), nil
}

// inboxView is the structured result of read_inbox and wait_for_messages,
// and the text of the inbox resource.
type inboxView struct {
	Items    []item `json:"items"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

func itemsResult(items []item, timedOut string) *mcp.CallToolResult {
	if items == nil {
		items = []item{}
	}
	var b strings.Builder
	switch {
	case timedOut != "":
		b.WriteString(timedOut + ": the inbox is empty.")
	case len(items) == 0:
		b.WriteString("The inbox is empty.")
	default:
		fmt.Fprintf(&b, "%d inbox item(s), now marked read:", len(items))
		for i, it := range items {
			fmt.Fprintf(&b, "\n%d. %s", i+1, it.line())
			if len(it.Result) > 0 {
				r, _ := json.Marshal(it.Result)
				b.WriteString("\n   result: " + string(r))
			}
			if len(it.Data) > 0 {
				r, _ := json.Marshal(it.Data)
				b.WriteString("\n   payload: " + string(r))
			}
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
		StructuredContent: inboxView{Items: items, TimedOut: timedOut != ""}}
}

func (f *Face) readResource(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	b, err := json.Marshal(inboxView{Items: append([]item{}, f.inbox.peek()...)})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: InboxURI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// announce tells the host a new item is waiting: an update of the inbox
// resource (to sessions that subscribed) and a log message (to sessions
// that set a log level). Neither marks it read.
func (f *Face) announce(it item) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: InboxURI}); err != nil {
		f.log.Debug("clawguard-mcp: resource updated", "err", err)
	}
	for ss := range f.server.Sessions() {
		err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: "notice", Logger: "clawguard.inbox",
			Data: map[string]any{"id": it.ID, "kind": it.Kind, "text": it.line(), "hold_id": it.Hold}})
		if err != nil && !errors.Is(err, context.Canceled) {
			f.log.Debug("clawguard-mcp: log notification", "err", err)
		}
	}
}
