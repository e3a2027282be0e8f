package mcpface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The inbox as the model reads it: read_inbox, wait_for_messages, the
// resource inbox://pending and the notifications that announce an item.

func (f *Face) readInbox(_ context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	items, err := f.inbox.read()
	if err != nil {
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
	items, err := f.inbox.wait(ctx, wctx)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err() // the host gave up: nothing was handed out
	case err != nil:
		return errorResult("the inbox could not be read (its items stay waiting): %v", err), nil
	case len(items) == 0:
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
