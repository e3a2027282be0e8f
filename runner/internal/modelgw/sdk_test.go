package modelgw

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
)

// The official SDKs, as an agent in its container would use them: the
// base URL of the gateway and the session's token as their key.

func (r *rig) anthropic(session string, opts ...aoption.RequestOption) *anthropic.Client {
	c := anthropic.NewClient(append([]aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(base),
		aoption.WithAuthToken(r.tokens[session]), aoption.WithHTTPClient(r.client(session)), aoption.WithMaxRetries(0)}, opts...)...)
	return &c
}

func (r *rig) openai(session string, opts ...ooption.RequestOption) *openai.Client {
	c := openai.NewClient(append([]ooption.RequestOption{ooption.WithBaseURL(base + "/v1"), ooption.WithAPIKey(r.tokens[session]),
		ooption.WithHTTPClient(r.client(session)), ooption.WithMaxRetries(0)}, opts...)...)
	return &c
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 300,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hello"))}}
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-5", MaxCompletionTokens: openai.Int(200),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say hello")}}
}

func responseParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-5", MaxOutputTokens: openai.Int(100),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say hello")}}
}

// Every SDK call, streamed and not, goes through to the provider with the
// real key and comes back whole; its usage is settled once, from the
// provider's own fields; the provider never sees the session's token.
func TestTheSDKsThroughTheGateway(t *testing.T) {
	r := newRig(t, DefaultLimits)
	ctx := context.Background()
	ac, oc := r.anthropic("s1"), r.openai("s1")
	type want struct {
		tokens modelrule.Tokens
		output int64 // the reserved output bound
	}
	calls := []struct {
		name string
		do   func() (string, error)
		want want
	}{
		{"anthropic messages", func() (string, error) {
			m, err := ac.Messages.New(ctx, messageParams())
			if err != nil {
				return "", err
			}
			return m.Content[0].Text, nil
		}, want{modelrule.Tokens{Input: 11, Output: 7, CacheRead: 3, CacheWrite: 2}, 300}},
		{"anthropic messages, streamed", func() (string, error) {
			s := ac.Messages.NewStreaming(ctx, messageParams())
			var text strings.Builder
			for s.Next() {
				if d := s.Current().Delta; d.Text != "" {
					text.WriteString(d.Text)
				}
			}
			return text.String(), s.Err()
		}, want{modelrule.Tokens{Input: 11, Output: 7, CacheRead: 3, CacheWrite: 2}, 300}},
		{"chat completions", func() (string, error) {
			c, err := oc.Chat.Completions.New(ctx, chatParams())
			if err != nil {
				return "", err
			}
			return c.Choices[0].Message.Content, nil
		}, want{modelrule.Tokens{Input: 16, Output: 5, CacheRead: 4}, 200}},
		{"chat completions, streamed", func() (string, error) {
			s := oc.Chat.Completions.NewStreaming(ctx, chatParams())
			var text strings.Builder
			for s.Next() {
				for _, c := range s.Current().Choices {
					text.WriteString(c.Delta.Content)
				}
			}
			return text.String(), s.Err()
		}, want{modelrule.Tokens{Input: 16, Output: 5, CacheRead: 4}, 200}},
		{"responses", func() (string, error) {
			resp, err := oc.Responses.New(ctx, responseParams())
			if err != nil {
				return "", err
			}
			return resp.OutputText(), nil
		}, want{modelrule.Tokens{Input: 20, Output: 6, CacheRead: 10}, 100}},
		{"responses, streamed", func() (string, error) {
			s := oc.Responses.NewStreaming(ctx, responseParams())
			var text strings.Builder
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.output_text.delta" {
					text.WriteString(ev.Delta)
				}
			}
			return text.String(), s.Err()
		}, want{modelrule.Tokens{Input: 20, Output: 6, CacheRead: 10}, 100}},
	}
	for i, c := range calls {
		text, err := c.do()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.HasPrefix(text, "he") {
			t.Errorf("%s: the answer %q", c.name, text)
		}
		settles := r.models.settlesOf(t, i+1)
		s := settles[i]
		got := modelrule.Tokens{Input: s.GetUsed().GetInput(), Output: s.GetUsed().GetOutput(), CacheRead: s.GetUsed().GetCacheRead(), CacheWrite: s.GetUsed().GetCacheWrite()}
		if !s.GetComplete() || got != c.want.tokens {
			t.Errorf("%s: settled %+v complete=%v, want %+v complete", c.name, got, s.GetComplete(), c.want.tokens)
		}
		res := r.models.reservations()[i]
		if res.GetWorst().GetOutput() != c.want.output || res.GetWorst().GetInput() <= DefaultLimits.InputOverhead || res.GetDecisionId() != s.GetReservationId() {
			t.Errorf("%s: reserved %v for %s", c.name, res.GetWorst(), s.GetReservationId())
		}
	}
	reqs := r.provider.Requests()
	if len(reqs) != len(calls) {
		t.Fatalf("the provider got %d calls, want %d", len(reqs), len(calls))
	}
	for _, q := range reqs {
		for k, vs := range q.Header {
			for _, v := range vs {
				if strings.Contains(v, r.tokens["s1"]) {
					t.Errorf("the provider saw the session's token in %s", k)
				}
			}
		}
		if strings.Contains(q.Raw, r.tokens["s1"]) {
			t.Error("the provider saw the session's token in a body")
		}
	}
	// A streamed chat completion was asked for its usage.
	if opts, _ := reqs[3].Body["stream_options"].(map[string]any); opts["include_usage"] != true {
		t.Errorf("streamed chat completion forwarded without include_usage: %s", reqs[3].Raw)
	}
	// Every call was decided on its provider and model.
	for i, d := range r.guard.requests() {
		want := "anthropic"
		if i >= 2 {
			want = "openai"
		}
		if d.GetAction() != modelrule.CallAction || d.GetResource()[modelrule.KeyProvider] != want || d.GetActor().GetAgent().GetSessionId() != "s1" {
			t.Errorf("decision %d: %v", i, d)
		}
	}
}

// count_tokens is decided and forwarded, and reserves and meters nothing
// (the provider does not bill it).
func TestCountTokensIsDecidedNotMetered(t *testing.T) {
	r := newRig(t, DefaultLimits)
	ac := r.anthropic("s1")
	n, err := ac.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if err != nil || n.InputTokens != 42 {
		t.Fatalf("CountTokens = %v, %v", n, err)
	}
	if len(r.guard.requests()) != 1 || len(r.models.reservations()) != 0 {
		t.Fatalf("%d decisions, %d reservations; want 1 and 0", len(r.guard.requests()), len(r.models.reservations()))
	}
	r.guard.effects["claude-opus-4-1"] = guardv1.Effect_EFFECT_DENY
	_, err = ac.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "claude-opus-4-1",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if apiStatus(err) != 403 {
		t.Fatalf("a denied model's count_tokens: %v", err)
	}
}

// A group without a budget reserves nothing before its call leaves: the
// settle carries the session and the worst case, and the server records
// the call from its decision.
func TestWithoutABudgetNothingIsReserved(t *testing.T) {
	r := newRig(t, DefaultLimits)
	for _, route := range r.models.routes {
		route.HasBudget = false
	}
	if _, err := r.anthropic("s1").Messages.New(context.Background(), messageParams()); err != nil {
		t.Fatal(err)
	}
	s := r.models.settlesOf(t, 1)[0]
	if len(r.models.reservations()) != 0 || s.GetSessionId() != "s1" || s.GetWorst().GetOutput() != 300 || s.GetReservationId() != "dec_1" {
		t.Fatalf("%d reservations; the settle %v", len(r.models.reservations()), s)
	}
}
