package mcpface

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// scriptedGateway is a runner's gateway scripted by the test, on a real
// unix socket: these tests are about what clawguard-mcp makes of its
// answers (the e2e tests run the real runner).
type scriptedGateway struct {
	agentv1.UnimplementedAgentGatewayServer
	mu       sync.Mutex
	actions  []*agentv1.ActionSpec
	tools    []*agentv1.McpTool // nil with noTools: ListTools is Unimplemented
	noTools  bool
	toolsErr error // ListTools fails with it
	sends    []*agentv1.SendRequest
	answer   func(*agentv1.SendRequest) *agentv1.SendResponse
	items    chan *agentv1.InboxResponse
	// noItemIDs: a runner from before acknowledged delivery (items carry
	// no item_id); else an item without one is given the next.
	noItemIDs bool
	nextID    int
	inboxReqs []*agentv1.InboxRequest
}

func (g *scriptedGateway) ListActions(context.Context, *agentv1.ListActionsRequest) (*agentv1.ListActionsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return &agentv1.ListActionsResponse{Actions: g.actions}, nil
}

func (g *scriptedGateway) ListTools(context.Context, *agentv1.ListToolsRequest) (*agentv1.ListToolsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.noTools {
		return nil, status.Error(codes.Unimplemented, "no guarded MCP servers")
	}
	if g.toolsErr != nil {
		return nil, g.toolsErr
	}
	return &agentv1.ListToolsResponse{Tools: g.tools}, nil
}

func (g *scriptedGateway) Send(_ context.Context, req *agentv1.SendRequest) (*agentv1.SendResponse, error) {
	g.mu.Lock()
	g.sends = append(g.sends, req)
	answer := g.answer
	g.mu.Unlock()
	return answer(req), nil
}

func (g *scriptedGateway) Inbox(req *agentv1.InboxRequest, s grpc.ServerStreamingServer[agentv1.InboxResponse]) error {
	g.mu.Lock()
	g.inboxReqs = append(g.inboxReqs, req)
	g.mu.Unlock()
	for {
		select {
		case it := <-g.items:
			g.mu.Lock()
			if it.ItemId == "" && !g.noItemIDs {
				g.nextID++
				it.ItemId = fmt.Sprintf("item_%d", g.nextID)
			}
			g.mu.Unlock()
			if err := s.Send(it); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (g *scriptedGateway) lastSend() *agentv1.SendRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sends) == 0 {
		return nil
	}
	return g.sends[len(g.sends)-1]
}

func (g *scriptedGateway) notice(n *agentv1.Notice) {
	if n.At == nil {
		n.At = timestamppb.Now()
	}
	g.items <- &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}}
}

const installSchema = `{"type":"object","properties":{"apt":{"type":["array","null"],"items":{"type":"string"}}}}`

func newScripted() *scriptedGateway {
	return &scriptedGateway{
		actions: []*agentv1.ActionSpec{
			{Name: "install_packages", Description: "install", InputSchemaJson: installSchema, CatalogAction: "self_mod.install_packages"},
			{Name: "mcp_call", InputSchemaJson: `{"type":"object"}`, CatalogAction: "mcp.call"},
			{Name: "reply", InputSchemaJson: `{"type":"object","properties":{"text":{"type":"string"}}}`},
		},
		noTools: true,
		answer: func(*agentv1.SendRequest) *agentv1.SendResponse {
			return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_DONE, Reason: "ok"}
		},
		items: make(chan *agentv1.InboxResponse, 16),
	}
}

// ackLog records acknowledged ids.
type ackLog struct {
	mu  sync.Mutex
	ids []string
}

func (a *ackLog) Ack(_ context.Context, ids []string) error {
	a.mu.Lock()
	a.ids = append(a.ids, ids...)
	a.mu.Unlock()
	return nil
}

func (a *ackLog) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.ids, id)
}

func (a *ackLog) count(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, x := range a.ids {
		if x == id {
			n++
		}
	}
	return n
}

// notes collects what the host is told.
type notes struct {
	mu        sync.Mutex
	updated   int
	logs      []string
	toolsList int
}

func (n *notes) count(f func() int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return f()
}

type harness struct {
	gw    *scriptedGateway
	face  *Face
	cs    *mcp.ClientSession
	acks  *ackLog
	notes *notes
}

// dialScripted serves gw on a fresh unix socket and dials it.
func dialScripted(tb testing.TB, gw *scriptedGateway) *grpc.ClientConn {
	tb.Helper()
	dir, err := os.MkdirTemp("", "cgmcp")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "gw.sock"))
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer()
	agentv1.RegisterAgentGatewayServer(srv, gw)
	go srv.Serve(ln)
	tb.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

func serve(t *testing.T, gw *scriptedGateway, protocol string) *harness {
	t.Helper()
	conn := dialScripted(t, gw)
	h := &harness{gw: gw, acks: &ackLog{}, notes: &notes{}}
	h.face = New(Config{Gateway: agentv1.NewAgentGatewayClient(conn), Acker: h.acks, CallWait: time.Second, MaxWait: 5 * time.Second,
		QueuePath: filepath.Join(t.TempDir(), "inbox.jsonl")})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go h.face.Run(ctx, st)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			h.notes.mu.Lock()
			h.notes.toolsList++
			h.notes.mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params.URI == InboxURI {
				h.notes.mu.Lock()
				h.notes.updated++
				h.notes.mu.Unlock()
			}
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			b, _ := json.Marshal(r.Params.Data)
			h.notes.mu.Lock()
			h.notes.logs = append(h.notes.logs, string(b))
			h.notes.mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	h.cs = cs
	return h
}

func (h *harness) call(t *testing.T, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestToolsAreTheRunnersActionsWithTheirSchemas(t *testing.T) {
	h := serve(t, newScripted(), "")
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	if len(got) != 4 || got["install_packages"] == nil || got["reply"] == nil || got[ReadInbox] == nil || got[WaitForMessages] == nil {
		t.Fatalf("tools = %v (mcp_call is offered per guarded tool, never itself)", slices.Collect(func(yield func(string) bool) {
			for n := range got {
				yield(n)
			}
		}))
	}
	b, _ := json.Marshal(got["install_packages"].InputSchema)
	var want, have any
	json.Unmarshal([]byte(installSchema), &want)
	json.Unmarshal(b, &have)
	wb, _ := json.Marshal(want)
	hb, _ := json.Marshal(have)
	if string(wb) != string(hb) || got["install_packages"].Description != "install" {
		t.Fatalf("install_packages schema %s, want the runner's %s", hb, wb)
	}
}

func TestOutcomesAreToolResults(t *testing.T) {
	gw := newScripted()
	h := serve(t, gw, "")
	for _, c := range []struct {
		resp    *agentv1.SendResponse
		isError bool
		status  string
		text    string
	}{
		{&agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_DONE, Reason: "installed cowsay"}, false, "done", "install_packages: installed cowsay"},
		{&agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_HELD, HoldId: "hold_7", Approvers: "telegram:dana", Reason: "needs an admin"},
			false, "held", "held for approval by telegram:dana as hold_7; you will be told the outcome"},
		{&agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_DENIED, Reason: "not on the allowlist"}, true, "denied", "denied: not on the allowlist"},
		{&agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_FAILED, Reason: "apt[]: pattern"}, true, "failed", "failed: apt[]: pattern"},
	} {
		gw.mu.Lock()
		gw.answer = func(req *agentv1.SendRequest) *agentv1.SendResponse {
			// The engine's notice of the same outcome arrives before the answer.
			gw.notice(&agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_RESULT, RequestId: req.GetRequestId(), Text: "the same outcome"})
			return c.resp
		}
		gw.mu.Unlock()
		res := h.call(t, "install_packages", map[string]any{"apt": []any{"cowsay"}})
		s := structured(t, res)
		if res.IsError != c.isError || s["status"] != c.status || !strings.Contains(text(res), c.text) {
			t.Errorf("%v: result %q isError=%v structured=%v", c.resp, text(res), res.IsError, s)
		}
		if c.status == "held" && (s["hold_id"] != "hold_7" || s["approvers"] != "telegram:dana") {
			t.Errorf("held: structured %v", s)
		}
		sent := gw.lastSend()
		if sent.GetAction() != "install_packages" || sent.GetPayload().GetFields()["apt"].GetListValue().GetValues()[0].GetStringValue() != "cowsay" ||
			!strings.HasPrefix(sent.GetRequestId(), "mcp-") || s["request_id"] != sent.GetRequestId() {
			t.Errorf("sent %v", sent)
		}
	}
	// Each outcome was the tool's answer: the inbox does not say it again.
	if r := h.call(t, ReadInbox, nil); !strings.Contains(text(r), "The inbox is empty") {
		t.Fatalf("read_inbox after answered calls: %s", text(r))
	}
	waitFor(t, "the answered calls' notices acknowledged (on receipt)", func() bool {
		h.acks.mu.Lock()
		defer h.acks.mu.Unlock()
		return len(h.acks.ids) == 4
	})
}

// TestHeldOutcomeArrivesOnceInTheInbox: a held call's later result is an
// inbox item, acknowledged once queued, announced to the host and returned
// once by read_inbox; a re-sent copy is acknowledged again and never shown.
func TestHeldOutcomeArrivesOnceInTheInbox(t *testing.T) {
	for _, protocol := range []string{"2025-06-18", ""} {
		t.Run("protocol "+protocol, func(t *testing.T) {
			gw := newScripted()
			h := serve(t, gw, protocol)
			if err := h.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: InboxURI}); err != nil {
				t.Fatal(err)
			}
			if err := h.cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}
			result, _ := structpb.NewStruct(map[string]any{"content": []any{map[string]any{"type": "text", "text": "wrote /w/x"}}})
			done := &agentv1.InboxResponse{ItemId: "push_result_7", Item: &agentv1.InboxResponse_Notice{Notice: &agentv1.Notice{
				Kind: agentv1.NoticeKind_NOTICE_KIND_RESULT, HoldId: "hold_7", Text: "mcp_call: done", Result: result, At: timestamppb.Now()}}}
			gw.items <- done
			waitFor(t, "the inbox resource's update", func() bool { return h.notes.count(func() int { return h.notes.updated }) > 0 })
			waitFor(t, "the log message", func() bool { return h.notes.count(func() int { return len(h.notes.logs) }) > 0 })
			rr, err := h.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: InboxURI})
			if err != nil || !strings.Contains(rr.Contents[0].Text, "hold_7") {
				t.Fatalf("inbox resource: %v %v", rr, err)
			}
			r := h.call(t, ReadInbox, nil)
			items := structured(t, r)["items"].([]any)
			if len(items) != 1 || !strings.Contains(text(r), "result (hold hold_7): mcp_call: done") || !strings.Contains(text(r), "wrote /w/x") {
				t.Fatalf("read_inbox: %s %v", text(r), items)
			}
			id := items[0].(map[string]any)["id"].(string)
			if id != "push_result_7" || !h.acks.has(id) {
				t.Fatalf("read item %s (want the runner's item id push_result_7) not acknowledged", id)
			}
			gw.items <- done // the runner sends it again (its ack was lost)
			waitFor(t, "the re-sent item's acknowledgement", func() bool { return h.acks.count(id) == 2 })
			if r := h.call(t, ReadInbox, nil); !strings.Contains(text(r), "The inbox is empty") {
				t.Fatalf("a re-sent item was shown again: %s", text(r))
			}
		})
	}
}

// A runner from before acknowledged delivery gives no item ids (and takes
// an item once it is on the stream): items are keyed by their digest,
// de-duplicated by it, and nothing is acknowledged.
func TestARunnerWithoutItemIDs(t *testing.T) {
	gw := newScripted()
	gw.noItemIDs = true
	h := serve(t, gw, "")
	m := func() *agentv1.InboxResponse {
		return &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{Id: "m1", Text: "hello"}}}
	}
	gw.items <- m()
	gw.items <- m()
	var got []any
	waitFor(t, "the message", func() bool {
		got = append(got, structured(t, h.call(t, ReadInbox, nil))["items"].([]any)...)
		return len(got) > 0
	})
	gw.items <- m()
	if r := h.call(t, WaitForMessages, map[string]any{"timeout_seconds": 0.5}); len(got) != 1 || got[0].(map[string]any)["id"] != "m:m1" || !strings.Contains(text(r), "nothing arrived") {
		t.Fatalf("shown %v, then %s", got, text(r))
	}
	gw.mu.Lock()
	asked := gw.inboxReqs[0].GetAcknowledges()
	gw.mu.Unlock()
	h.acks.mu.Lock()
	n := len(h.acks.ids)
	h.acks.mu.Unlock()
	if n != 0 || !asked {
		t.Fatalf("%d acks to a runner that gave no item ids (acknowledges asked: %v)", n, asked)
	}
}

func TestWaitForMessages(t *testing.T) {
	gw := newScripted()
	h := serve(t, gw, "")
	start := time.Now()
	r := h.call(t, WaitForMessages, map[string]any{"timeout_seconds": 0.2})
	if r.IsError || !strings.Contains(text(r), "nothing arrived") || structured(t, r)["timed_out"] != true {
		t.Fatalf("timeout: %s", text(r))
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Fatalf("returned before its timeout")
	}
	// A bound past MaxWait is cut to it, not refused.
	got := make(chan *mcp.CallToolResult, 1)
	go func() { got <- h.call(t, WaitForMessages, map[string]any{"timeout_seconds": 3600}) }()
	gw.items <- &agentv1.InboxResponse{ItemId: "push_m1", Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{
		Id: "m1", FromAgentGroupId: "ag_2", Text: "hello", At: timestamppb.Now()}}}
	select {
	case r := <-got:
		if !strings.Contains(text(r), "message from agent group ag_2: hello") || !h.acks.has("push_m1") {
			t.Fatalf("wait_for_messages: %s (acknowledged: %v)", text(r), h.acks.has("push_m1"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wait_for_messages did not return when a message arrived")
	}
}

func TestACallWithNoAnswerInTimeIsPendingAndItsOutcomeComesLater(t *testing.T) {
	gw := newScripted()
	release := make(chan struct{})
	gw.answer = func(req *agentv1.SendRequest) *agentv1.SendResponse {
		<-release
		gw.notice(&agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_RESULT, RequestId: req.GetRequestId(), Text: "install_packages: installed"})
		return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_DONE}
	}
	h := serve(t, gw, "")
	r := h.call(t, "install_packages", map[string]any{"apt": []any{"cowsay"}})
	if r.IsError || structured(t, r)["status"] != "pending" || !strings.Contains(text(r), "do not send it again") {
		t.Fatalf("slow call: %s", text(r))
	}
	close(release)
	w := h.call(t, WaitForMessages, map[string]any{"timeout_seconds": 5})
	if !strings.Contains(text(w), "install_packages: installed") {
		t.Fatalf("the slow call's outcome: %s", text(w))
	}
}

func TestGuardedToolsAndTheirNames(t *testing.T) {
	gw := newScripted()
	gw.noTools = false
	gw.tools = []*agentv1.McpTool{
		{Server: "fs", Tool: "write_file", Description: "Write a file", InputSchemaJson: `{"type":"object","properties":{"path":{"type":"string"}}}`, Effect: "hold"},
		{Server: "a.b", Tool: "x"},
		{Server: "a_b", Tool: "x"},
		{Server: "odd", Tool: "t", InputSchemaJson: `{"type":"string"}`},
	}
	gw.answer = func(req *agentv1.SendRequest) *agentv1.SendResponse {
		res, _ := structpb.NewStruct(map[string]any{"content": []any{map[string]any{"type": "text", "text": "wrote it"}}, "isError": false})
		return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_DONE, Result: res}
	}
	h := serve(t, gw, "2025-06-18")
	if got := toolNames(t, h.cs); !slices.Equal(got, []string{"fs__write_file", "install_packages", ReadInbox, "reply", WaitForMessages}) {
		t.Fatalf("tools = %v", got)
	}
	r := h.call(t, "fs__write_file", map[string]any{"path": "/w/x"})
	sent := gw.lastSend()
	p := sent.GetPayload().AsMap()
	if sent.GetAction() != MCPCall || p["server"] != "fs" || p["tool"] != "write_file" || p["arguments"].(map[string]any)["path"] != "/w/x" {
		t.Fatalf("sent %v", sent)
	}
	if r.IsError || text(r) != "wrote it" {
		t.Fatalf("the downstream result is not passed through: %+v", r)
	}
	// The refusals are told, once each.
	inbox := text(h.call(t, ReadInbox, nil))
	for _, want := range []string{`tool "x" of MCP server "a.b" and tool "x" of MCP server "a_b" are not offered: their names collide as "a_b__x"`,
		`tool "t" of MCP server "odd" is not offered: its input schema's type is string`} {
		if strings.Count(inbox, want) != 1 {
			t.Errorf("inbox %q does not say %q once", inbox, want)
		}
	}

	// TOOLS_CHANGED: the host is told, and the list is read again.
	gw.mu.Lock()
	gw.tools = gw.tools[:1]
	gw.tools = append(gw.tools, &agentv1.McpTool{Server: "fs", Tool: "read_file", InputSchemaJson: `{"type":"object"}`, Effect: "allow"})
	gw.mu.Unlock()
	gw.notice(&agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_TOOLS_CHANGED})
	waitFor(t, "tools/list_changed", func() bool { return h.notes.count(func() int { return h.notes.toolsList }) > 0 })
	if got := toolNames(t, h.cs); !slices.Contains(got, "fs__read_file") || !slices.Contains(got, "fs__write_file") {
		t.Fatalf("tools after the change = %v", got)
	}
	if r := h.call(t, ReadInbox, nil); !strings.Contains(text(r), "The inbox is empty") {
		t.Fatalf("TOOLS_CHANGED reached the model: %s", text(r))
	}
}

func TestGuardedToolNames(t *testing.T) {
	for _, c := range []struct{ server, tool, want string }{
		{"fs", "read_file", "fs__read_file"},
		{"git hub", "pr.merge", "git_hub__pr_merge"},
	} {
		if got := guardedToolName(c.server, c.tool); got != c.want {
			t.Errorf("guardedToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
	}
	long := guardedToolName(strings.Repeat("s", 40), strings.Repeat("t", 40))
	if len(long) != maxToolName || !toolNameRule.MatchString(long) || long == guardedToolName(strings.Repeat("s", 40), strings.Repeat("t", 41)) {
		t.Fatalf("long name %q", long)
	}
}

// TestGuardedToolsThatCannotBeListedYet: the delivery actions are offered
// at once, the guarded tools once they can be listed (the host is told),
// and a later listing failure keeps the guarded tools offered so far.
func TestGuardedToolsThatCannotBeListedYet(t *testing.T) {
	gw := newScripted()
	gw.noTools = false
	gw.toolsErr = status.Error(codes.Unavailable, "servers starting")
	gw.tools = []*agentv1.McpTool{{Server: "fs", Tool: "read_file", InputSchemaJson: `{"type":"object"}`}}
	h := serve(t, gw, "2025-06-18")
	if got := toolNames(t, h.cs); !slices.Equal(got, []string{"install_packages", ReadInbox, "reply", WaitForMessages}) {
		t.Fatalf("tools while guarded tools cannot be listed = %v", got)
	}
	gw.mu.Lock()
	gw.toolsErr = nil
	gw.mu.Unlock()
	waitFor(t, "the guarded tool", func() bool { return slices.Contains(toolNames(t, h.cs), "fs__read_file") })
	waitFor(t, "tools/list_changed", func() bool { return h.notes.count(func() int { return h.notes.toolsList }) > 0 })
	gw.mu.Lock()
	gw.toolsErr = status.Error(codes.Unavailable, "runner busy")
	gw.mu.Unlock()
	if err := h.face.Refresh(context.Background()); err == nil {
		t.Fatal("a failed listing was not reported")
	}
	if got := toolNames(t, h.cs); !slices.Contains(got, "fs__read_file") {
		t.Fatalf("a failed listing dropped the guarded tools: %v", got)
	}
}
