package gwe2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
)

func message(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 300,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hello"))}}
}

func apiError(err error) *anthropic.Error {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// The official SDKs in a real container, configured by nothing but the
// environment the runner gives it: every API, streamed and not, reaches
// the provider with the real key; the provider never sees the session's
// token; the container's environment, files and processes hold no real
// key; the usage lands per group and model.
func TestTheSDKsInAContainer(t *testing.T) {
	needDocker(t)
	w := newWorld(t, modelgw.DefaultLimits)
	got := runAgent(t, w.dirs["s1"], modelgw.Env(base, w.tokens["s1"]))
	lines := got.lines(t)
	for _, call := range []string{"anthropic", "anthropic-stream", "chat", "chat-stream", "responses", "responses-stream"} {
		l := lines[call]
		if l == nil || l["error"] != nil || !strings.HasPrefix(l["text"].(string), "he") {
			t.Errorf("%s in the container: %v\nstderr: %s", call, l, got.stderr)
		}
	}
	keys := []string{w.provider.Keys["anthropic"], w.provider.Keys["openai"]}
	for _, q := range w.provider.Requests() {
		if q.Header.Get("X-Api-Key") != keys[0] && q.Header.Get("Authorization") != "Bearer "+keys[1] {
			t.Errorf("%s reached the provider without the real key", q.Path)
		}
		for k, vs := range q.Header {
			if strings.Contains(strings.Join(vs, " "), w.tokens["s1"]) {
				t.Errorf("the provider saw the session's token in %s", k)
			}
		}
	}
	if n := len(w.provider.Requests()); n != 6 {
		t.Errorf("the provider got %d calls, want 6", n)
	}
	envs, _ := lines["environments"]["env"].([]any)
	if len(envs) == 0 {
		t.Fatalf("the agent read no process's environment: %v", lines["environments"])
	}
	sawToken := false
	for _, key := range keys {
		for _, e := range envs {
			if strings.Contains(e.(string), key) {
				t.Errorf("a process in the container holds the real key: %s", strings.SplitN(e.(string), "=", 2)[0])
			}
			sawToken = sawToken || strings.Contains(e.(string), w.tokens["s1"])
		}
		for _, e := range got.env {
			if strings.Contains(e, key) {
				t.Errorf("the container's environment holds the real key: %s", strings.SplitN(e, "=", 2)[0])
			}
		}
		for name, b := range got.files {
			if strings.Contains(string(b), key) {
				t.Errorf("the container's file %s holds the real key", name)
			}
		}
	}
	if !sawToken {
		t.Error("the agent's environment lacks its session token: the search above searched nothing")
	}
	waitFor(t, 10*time.Second, "six calls settled", func() bool {
		u := w.usage()
		return u["anthropic/claude-sonnet-4-5"].GetCalls() == 2 && u["openai/gpt-5"].GetCalls() == 4
	})
	u := w.usage()
	if a := u["anthropic/claude-sonnet-4-5"]; a.GetInputTokens() != 22 || a.GetOutputTokens() != 14 || a.GetCacheReadTokens() != 6 || a.GetCacheWriteTokens() != 4 {
		t.Errorf("anthropic usage: %v", a)
	}
	if o := u["openai/gpt-5"]; o.GetInputTokens() != 2*16+2*20 || o.GetOutputTokens() != 2*5+2*6 || o.GetCacheReadTokens() != 2*4+2*10 {
		t.Errorf("openai usage: %v", o)
	}
}

// N calls racing for a budget never overshoot it: every call reserves its
// worst case first, so of twelve calls racing for room for five exactly
// five pass — each spending what it reserved — and the rest are refused in
// the provider's shape; what was spent never passes the budget.
func TestRacingCallsNeverOvershootTheBudget(t *testing.T) {
	limits := modelgw.DefaultLimits
	limits.RouteTTL = 0 // the budget set below applies to the next call
	w := newWorld(t, limits)
	w.provider.ReportWorst = true
	ctx := context.Background()
	// One call's worst case: its body's size, the overhead, its max_tokens.
	if _, err := w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5")); err != nil {
		t.Fatal(err)
	}
	var r int64
	waitFor(t, 10*time.Second, "the first call settled", func() bool {
		return w.srv.pool.QueryRow(ctx, `SELECT tokens FROM model_reservations WHERE settled_at IS NOT NULL`).Scan(&r) == nil
	})
	budget := r + 5*r + r/2 // the first call's, and room for five more
	if _, err := w.srv.op.registry.SetModelBudget(ctx, &guardv1.SetModelBudgetRequest{Group: w.group, Period: guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_DAY,
		Tokens: budget, OnExceed: guardv1.Effect_EFFECT_DENY}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		passed, refused int
		others          []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5"))
			mu.Lock()
			defer mu.Unlock()
			switch ae := apiError(err); {
			case err == nil:
				passed++
			case ae != nil && ae.StatusCode == 403 && strings.Contains(ae.Error(), "budget"):
				refused++
			default:
				others = append(others, err)
			}
		}()
	}
	wg.Wait()
	if len(others) > 0 || passed != 5 || refused != n-5 {
		t.Fatalf("%d passed, %d refused past the budget, others %v; want 5 and %d", passed, refused, others, n-5)
	}
	var spent, open int64
	waitFor(t, 10*time.Second, "every call settled", func() bool {
		err := w.srv.pool.QueryRow(ctx, `SELECT spent_tokens, reserved_tokens FROM model_spend WHERE agent_group_id = $1`, w.group).Scan(&spent, &open)
		return err == nil && open == 0 && spent == 6*r
	})
	if spent > budget {
		t.Fatalf("spent %d of a %d budget", spent, budget)
	}
}

// Past the budget the call is held for the group's admins — the card says
// what the group spent and on what — answered 429 naming the hold; once
// approved, the next call goes through.
func TestPastTheBudgetHeldApprovedThenGoesThrough(t *testing.T) {
	limits := modelgw.DefaultLimits
	limits.HoldWait, limits.RouteTTL = 500*time.Millisecond, 0
	w := newWorld(t, limits)
	ctx := context.Background()
	if _, err := w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.srv.op.registry.SetModelBudget(ctx, &guardv1.SetModelBudgetRequest{Group: w.group, Period: guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_DAY,
		Tokens: 100}); err != nil {
		t.Fatal(err)
	}
	_, err := w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5"))
	ae := apiError(err)
	if ae == nil || ae.StatusCode != 429 || !strings.Contains(ae.Error(), "rate_limit_error") || ae.Response.Header.Get(modelgw.HeaderHold) == "" {
		t.Fatalf("past the budget: %v", err)
	}
	hold := ae.Response.Header.Get(modelgw.HeaderHold)
	h, err := w.srv.op.approvals.Get(ctx, &guardv1.GetRequest{Id: hold})
	if err != nil {
		t.Fatal(err)
	}
	q := h.GetHold().GetQuestion()
	if !strings.Contains(q, "of 100 tokens spent") || !strings.Contains(q, "anthropic/claude-sonnet-4-5: 1 calls") || h.GetHold().GetKind() != "model_budget" {
		t.Fatalf("the approver's card: %q (%s)", q, h.GetHold().GetKind())
	}
	if _, err := w.srv.op.approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: owner}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5")); err != nil {
		t.Fatalf("after the approval: %v", err)
	}
	if _, err := w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5")); apiError(err) == nil || apiError(err).StatusCode != 429 {
		t.Fatalf("an approval once lets one call past: %v", err)
	}
}

// A model the group's rules deny is refused in the provider's error shape;
// a held one is 429 naming the hold; a frozen group's calls are refused;
// none reaches the provider.
func TestRefusedModelsAndAFrozenGroup(t *testing.T) {
	limits := modelgw.DefaultLimits
	limits.HoldWait = 200 * time.Millisecond
	w := newWorld(t, limits)
	ctx := context.Background()
	for model, effect := range map[string]guardv1.Effect{"claude-opus-4-1": guardv1.Effect_EFFECT_DENY, "claude-opus-4": guardv1.Effect_EFFECT_HOLD} {
		if _, err := w.srv.op.registry.SetModelRule(ctx, &guardv1.SetModelRuleRequest{Group: w.group, Provider: "anthropic", Model: model, Effect: effect}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := w.anthropic("s1").Messages.New(ctx, message("claude-opus-4-1"))
	if ae := apiError(err); ae == nil || ae.StatusCode != 403 || !strings.Contains(ae.Error(), "permission_error") ||
		!strings.Contains(ae.Error(), "model rule anthropic/claude-opus-4-1") {
		t.Fatalf("a denied model: %v", err)
	}
	_, err = w.anthropic("s1").Messages.New(ctx, message("claude-opus-4"))
	if ae := apiError(err); ae == nil || ae.StatusCode != 429 || !strings.Contains(ae.Error(), "held for approval") {
		t.Fatalf("a held model: %v", err)
	}
	if _, err := w.srv.op.registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.group, Reason: "incident"}); err != nil {
		t.Fatal(err)
	}
	_, err = w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5"))
	if ae := apiError(err); ae == nil || ae.StatusCode != 403 || !strings.Contains(strings.ToLower(ae.Error()), "frozen") {
		t.Fatalf("a frozen group's call: %v", err)
	}
	if n := len(w.provider.Requests()); n != 0 {
		t.Fatalf("the provider got %d refused calls", n)
	}
}

// Another session's token, and a token after its session ended, are
// refused (401) before anything is decided or forwarded.
func TestOtherSessionsAndEndedSessionsTokens(t *testing.T) {
	w := newWorld(t, modelgw.DefaultLimits)
	ctx := context.Background()
	own, other := w.tokens["s1"], w.tokens["s2"]
	w.tokens["s1"] = other // s2's token on s1's socket
	_, err := w.anthropic("s1").Messages.New(ctx, message("claude-sonnet-4-5"))
	if ae := apiError(err); ae == nil || ae.StatusCode != 401 {
		t.Fatalf("another session's token: %v", err)
	}
	w.tokens["s1"] = own
	c := w.anthropic("s1")
	if _, err := c.Messages.New(ctx, message("claude-sonnet-4-5")); err != nil {
		t.Fatalf("its own token: %v", err)
	}
	w.gw.Close("s1")
	if _, err := c.Messages.New(ctx, message("claude-sonnet-4-5")); apiError(err) == nil || apiError(err).StatusCode != 401 {
		t.Fatalf("a token after its session ended: %v", err)
	}
	if n := len(w.provider.Requests()); n != 1 {
		t.Fatalf("the provider got %d calls, want the one with the session's own token", n)
	}
}
