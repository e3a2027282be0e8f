// Command sdkclient is an agent's side of the model gateway's container
// test: the official Anthropic and OpenAI Go SDKs configured only by the
// environment the runner gives a container (ANTHROPIC_BASE_URL,
// ANTHROPIC_AUTH_TOKEN, OPENAI_BASE_URL, OPENAI_API_KEY), each API called
// streamed and not. It prints one JSON line per call, then one with every
// process's environment it can read, for the test to search for keys.
package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

type line struct {
	Call  string   `json:"call"`
	Text  string   `json:"text,omitempty"`
	Error string   `json:"error,omitempty"`
	Env   []string `json:"env,omitempty"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := json.NewEncoder(os.Stdout)
	ac, oc := anthropic.NewClient(), openai.NewClient()
	msg := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 300,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hello"))}}
	chat := openai.ChatCompletionNewParams{Model: "gpt-5", MaxCompletionTokens: openai.Int(200),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say hello")}}
	resp := responses.ResponseNewParams{Model: "gpt-5", MaxOutputTokens: openai.Int(100),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say hello")}}
	calls := []struct {
		name string
		do   func() (string, error)
	}{
		{"anthropic", func() (string, error) {
			m, err := ac.Messages.New(ctx, msg)
			if err != nil {
				return "", err
			}
			return m.Content[0].Text, nil
		}},
		{"anthropic-stream", func() (string, error) {
			s := ac.Messages.NewStreaming(ctx, msg)
			var b strings.Builder
			for s.Next() {
				b.WriteString(s.Current().Delta.Text)
			}
			return b.String(), s.Err()
		}},
		{"chat", func() (string, error) {
			c, err := oc.Chat.Completions.New(ctx, chat)
			if err != nil {
				return "", err
			}
			return c.Choices[0].Message.Content, nil
		}},
		{"chat-stream", func() (string, error) {
			s := oc.Chat.Completions.NewStreaming(ctx, chat)
			var b strings.Builder
			for s.Next() {
				for _, c := range s.Current().Choices {
					b.WriteString(c.Delta.Content)
				}
			}
			return b.String(), s.Err()
		}},
		{"responses", func() (string, error) {
			r, err := oc.Responses.New(ctx, resp)
			if err != nil {
				return "", err
			}
			return r.OutputText(), nil
		}},
		{"responses-stream", func() (string, error) {
			s := oc.Responses.NewStreaming(ctx, resp)
			var b strings.Builder
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.output_text.delta" {
					b.WriteString(ev.Delta)
				}
			}
			return b.String(), s.Err()
		}},
	}
	for _, c := range calls {
		text, err := c.do()
		l := line{Call: c.name, Text: text}
		if err != nil {
			l.Error = err.Error()
		}
		out.Encode(l)
	}
	out.Encode(line{Call: "environments", Env: environments()})
}

// environments are every environment variable of every process this one
// may read (its own and clawguard-init's).
func environments() []string {
	var all []string
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv != "" {
				all = append(all, kv)
			}
		}
	}
	return all
}
