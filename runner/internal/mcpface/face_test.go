package mcpface

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

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
