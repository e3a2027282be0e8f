package main

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// openaiModel is Chat Completions, configured by the environment
// (OPENAI_BASE_URL, OPENAI_API_KEY: the gateway and the session's token).
type openaiModel struct {
	client openai.Client
	model  string
	msgs   []openai.ChatCompletionMessageParamUnion
	tools  []openai.ChatCompletionToolUnionParam
}

func newOpenAI(model string) *openaiModel {
	if model == "" {
		model = "gpt-5-mini"
	}
	return &openaiModel{client: openai.NewClient(), model: model}
}

func (m *openaiModel) start(task string, tools []*mcp.Tool) {
	for _, t := range tools {
		m.tools = append(m.tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: t.Name,
			Description: openai.String(t.Description), Parameters: shared.FunctionParameters(schemaOf(t))}))
	}
	m.msgs = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(task)}
}

func (m *openaiModel) turn(ctx context.Context) (string, []toolCall, error) {
	resp, err := m.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: m.model, Messages: m.msgs, Tools: m.tools,
		MaxCompletionTokens: openai.Int(2048)})
	if err != nil {
		return "", nil, err
	}
	if len(resp.Choices) == 0 {
		return "", nil, nil
	}
	msg := resp.Choices[0].Message
	m.msgs = append(m.msgs, msg.ToParam())
	var calls []toolCall
	for _, c := range msg.ToolCalls {
		args := map[string]any{}
		json.Unmarshal([]byte(c.Function.Arguments), &args)
		calls = append(calls, toolCall{ID: c.ID, Name: c.Function.Name, Args: args})
	}
	return msg.Content, calls, nil
}

func (m *openaiModel) results(rs []toolResult) {
	for _, r := range rs {
		m.msgs = append(m.msgs, openai.ToolMessage(r.Text, r.ID))
	}
}
