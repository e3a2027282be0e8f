package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// model is one provider's API as the loop uses it: the conversation is
// the model client's own.
type model interface {
	// start begins the conversation: the task, and the tools offered.
	start(task string, tools []*mcp.Tool)
	// turn asks the model for its next turn: its text and the tool calls
	// it asks for (none: it has answered).
	turn(ctx context.Context) (text string, calls []toolCall, err error)
	// results hands the model its tool calls' results.
	results(rs []toolResult)
}

type toolCall struct {
	ID, Name string
	Args     map[string]any
}

type toolResult struct {
	ID, Text string
	IsError  bool
}

// loop runs the agent: turns of the model, each tool call it asks for made
// through clawguard-mcp (so decided by the guard), until it answers.
func loop(ctx context.Context, m model, tools *mcp.ClientSession, task string, turns int, out io.Writer) (string, error) {
	list, err := tools.ListTools(ctx, &mcp.ListToolsParams{})
	if err != nil {
		return "", fmt.Errorf("list clawguard-mcp's tools: %w", err)
	}
	fmt.Fprintf(out, "task: %s\ntools: %d\n", strings.TrimSpace(task), len(list.Tools))
	m.start(task, list.Tools)
	for range turns {
		text, calls, err := m.turn(ctx)
		if err != nil {
			return "", fmt.Errorf("the model: %w", err)
		}
		if text != "" {
			fmt.Fprintf(out, "model: %s\n", text)
		}
		if len(calls) == 0 {
			return text, nil
		}
		var rs []toolResult
		for _, c := range calls {
			args, _ := json.Marshal(c.Args)
			fmt.Fprintf(out, "tool: %s %s\n", c.Name, args)
			res, err := tools.CallTool(ctx, &mcp.CallToolParams{Name: c.Name, Arguments: c.Args})
			r := toolResult{ID: c.ID, Text: resultText(res, err), IsError: err != nil || (res != nil && res.IsError)}
			fmt.Fprintf(out, "  → %s\n", r.Text)
			rs = append(rs, r)
		}
		m.results(rs)
	}
	return "", fmt.Errorf("no answer within %d turns", turns)
}

// resultText is a tool result as the model reads it.
func resultText(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// schemaOf is a tool's input schema as a JSON object.
func schemaOf(t *mcp.Tool) map[string]any {
	out := map[string]any{"type": "object"}
	if t.InputSchema == nil {
		return out
	}
	b, err := json.Marshal(t.InputSchema)
	if err == nil {
		json.Unmarshal(b, &out)
	}
	return out
}
