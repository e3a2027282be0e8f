package mcpface

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// outcome is the structured part of every tool result clawguard-mcp gives
// for an action: what the model can act on without parsing the text.
type outcome struct {
	Status    string         `json:"status"` // done, held, denied, failed, pending
	RequestID string         `json:"request_id"`
	HoldID    string         `json:"hold_id,omitempty"`
	Approvers string         `json:"approvers,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Result    map[string]any `json:"result,omitempty"`
}

// toolResult turns the gateway's answer into the tool's result. passThrough
// is set for a guarded MCP tool: its DONE result is the downstream
// server's CallToolResult, returned as it is.
func toolResult(action, requestID string, r *agentv1.SendResponse, passThrough bool) *mcp.CallToolResult {
	o := outcome{RequestID: requestID, HoldID: r.GetHoldId(), Approvers: r.GetApprovers(), Reason: r.GetReason()}
	var text string
	isError := false
	switch r.GetStatus() {
	case agentv1.SendStatus_SEND_STATUS_DONE:
		if passThrough {
			if res, ok := downstream(r); ok {
				return res
			}
		}
		o.Status, o.Result = "done", r.GetResult().AsMap()
		if len(o.Result) == 0 && len(r.GetResultJson()) > 0 {
			_ = json.Unmarshal(r.GetResultJson(), &o.Result)
		}
		text = action + " done"
		if r.GetReason() != "" {
			text = action + ": " + r.GetReason()
		}
		if len(o.Result) > 0 {
			b, _ := json.Marshal(o.Result)
			text += "\n\nResult: " + string(b)
		}
	case agentv1.SendStatus_SEND_STATUS_HELD:
		o.Status = "held"
		who := ""
		if r.GetApprovers() != "" {
			who = " by " + r.GetApprovers()
		}
		text = fmt.Sprintf("%s is held for approval%s as %s; you will be told the outcome: it arrives in your inbox "+
			"(read_inbox, or wait_for_messages to wait for it). Nothing has run yet.", action, who, r.GetHoldId())
		if r.GetReason() != "" {
			text += " Why it is held: " + r.GetReason()
		}
	case agentv1.SendStatus_SEND_STATUS_DENIED:
		o.Status, isError = "denied", true
		text = fmt.Sprintf("%s denied: %s. Nothing was run.", action, r.GetReason())
	default:
		o.Status, isError = "failed", true
		text = fmt.Sprintf("%s failed: %s", action, r.GetReason())
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: o, IsError: isError}
}

// pendingResult is the answer to a call the gateway did not answer in
// time: it goes on (the runner runs it on its own), and its outcome comes
// as an inbox item.
func pendingResult(action, requestID string, err error) *mcp.CallToolResult {
	o := outcome{Status: "pending", RequestID: requestID, Reason: err.Error()}
	text := fmt.Sprintf("%s has no answer yet (request %s: %v). If the runner received it, it goes on and its outcome "+
		"arrives in your inbox (read_inbox, or wait_for_messages to wait for it); do not send it again.", action, requestID, err)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: o}
}

// errorResult is a call refused before it reached the runner.
func errorResult(format string, args ...any) *mcp.CallToolResult {
	text := fmt.Sprintf(format, args...)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: outcome{Status: "failed", Reason: text}, IsError: true}
}

// downstream reads a guarded tool's CallToolResult from a DONE answer.
// It comes as JSON (asked for with result_as_json: no conversion on either
// side), or as a Struct from a runner that does not send JSON.
func downstream(r *agentv1.SendResponse) (*mcp.CallToolResult, bool) {
	b := r.GetResultJson()
	if len(b) == 0 {
		if r.GetResult() == nil {
			return nil, false
		}
		var err error
		if b, err = protojson.Marshal(r.GetResult()); err != nil {
			return nil, false
		}
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil || (res.Content == nil && res.StructuredContent == nil) {
		return nil, false
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return &res, true
}
