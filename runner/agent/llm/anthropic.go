package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// anthropicModel is the Messages API, configured by the environment
// (ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN: the gateway and the
// session's token).
type anthropicModel struct {
	client anthropic.Client
	model  string
	msgs   []anthropic.MessageParam
	tools  []anthropic.ToolUnionParam
}

func newAnthropic(model string) *anthropicModel {
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	return &anthropicModel{client: anthropic.NewClient(), model: model}
}

func (m *anthropicModel) start(task string, tools []*mcp.Tool) {
	for _, t := range tools {
		s := schemaOf(t)
		var required []string
		if r, ok := s["required"].([]any); ok {
			for _, x := range r {
				if name, ok := x.(string); ok {
					required = append(required, name)
				}
			}
		}
		m.tools = append(m.tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: t.Name, Description: anthropic.String(t.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: s["properties"], Required: required}}})
	}
	m.msgs = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(task))}
}

func (m *anthropicModel) turn(ctx context.Context) (string, []toolCall, error) {
	resp, err := m.client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(m.model), MaxTokens: 2048,
		Messages: m.msgs, Tools: m.tools})
	if err != nil {
		return "", nil, err
	}
	m.msgs = append(m.msgs, resp.ToParam())
	var (
		text  []string
		calls []toolCall
	)
	for _, block := range resp.Content {
		switch b := block.AsAny().(type) {
		case anthropic.TextBlock:
			text = append(text, b.Text)
		case anthropic.ToolUseBlock:
			args := map[string]any{}
			json.Unmarshal(b.Input, &args)
			calls = append(calls, toolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	return strings.Join(text, "\n"), calls, nil
}

func (m *anthropicModel) results(rs []toolResult) {
	blocks := make([]anthropic.ContentBlockParamUnion, 0, len(rs))
	for _, r := range rs {
		blocks = append(blocks, anthropic.NewToolResultBlock(r.ID, r.Text, r.IsError))
	}
	m.msgs = append(m.msgs, anthropic.NewUserMessage(blocks...))
}
