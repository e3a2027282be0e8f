package bridge

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// An MCP tool call's card shows the server, the tool and the exact
// arguments from the hold's resource and payload, whatever its question says.
func TestMCPCallCardShowsServerToolAndExactArguments(t *testing.T) {
	p, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "write_file",
		"arguments": map[string]any{"path": "a.txt", "content": "line 1\nline 2"}})
	h := &guardv1.Hold{Id: "hold_1", Kind: "mcp_call", AgentGroupId: "ag_1", Title: "MCP tool call: fs / write_file",
		Question: "innocent words", Payload: p, Resource: map[string]string{"server": "fs", "tool": "write_file", "digest": "d"}}
	text := CardText(h)
	for _, want := range []string{"Server: fs", "Tool: write_file", `"path": "a.txt"`, `"content": "line 1\nline 2"`, "hold_1"} {
		if !strings.Contains(text, want) {
			t.Errorf("card lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "innocent words") {
		t.Errorf("card shows the requester's words instead of the call:\n%s", text)
	}
	long, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "write_file", "arguments": map[string]any{"content": strings.Repeat("x", 5000)}})
	h.Payload = long
	if text := CardText(h); len([]rune(text)) > 4096 || !strings.Contains(text, "ncl approvals get hold_1") {
		t.Errorf("a long call's card: %d characters, cut note missing", len([]rune(text)))
	}
}

// Issue 32: once a hold is escalated, its new approvers are recipients of
// its card (the escalated event sends them one); before, they are not.
func TestEscalatedApproversReceiveTheCard(t *testing.T) {
	h := &guardv1.Hold{DeliveredTo: "telegram:dana"}
	if got := Recipients(h, "telegram"); len(got) != 1 || got[0] != "telegram:dana" {
		t.Fatalf("before the escalation: %v", got)
	}
	h.EscalatedTo = []string{"telegram:erin", "slack:olga", "telegram:dana"}
	got := Recipients(h, "telegram")
	if len(got) != 2 || got[0] != "telegram:dana" || got[1] != "telegram:erin" {
		t.Fatalf("after the escalation: %v, want dana then erin (slack's own bridge cards olga)", got)
	}
}
