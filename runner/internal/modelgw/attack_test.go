package modelgw

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func apiStatus(err error) int {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode
	}
	return 0
}

// post sends a raw request on a session's socket with the given headers.
func (r *rig) post(session, path, body string, header map[string]string) (*http.Response, string) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := r.client(session).Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (r *rig) bearer(session string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + r.tokens[session]}
}

const message = `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`

// A call without the session's own current token is refused in the
// provider's shape (401) and never reaches the provider: no token, a
// wrong one, another session's, one of a session that ended, and a right
// one beside a wrong one.
func TestOnlyTheSessionsOwnTokenIsTaken(t *testing.T) {
	r := newRig(t, DefaultLimits)
	s1, s2 := r.tokens["s1"], r.tokens["s2"]
	cases := []struct {
		name   string
		header map[string]string
	}{
		{"no token", map[string]string{}},
		{"a wrong token", map[string]string{"X-Api-Key": strings.Repeat("0", 64)}},
		{"another session's token", map[string]string{"X-Api-Key": s2}},
		{"another session's, as a bearer", map[string]string{"Authorization": "Bearer " + s2}},
		{"its own beside another's", map[string]string{"X-Api-Key": s1, "Authorization": "Bearer " + s2}},
		{"not a bearer", map[string]string{"Authorization": "Basic " + s1}},
	}
	for _, c := range cases {
		resp, body := r.post("s1", "/v1/messages", message, c.header)
		var shaped struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		json.Unmarshal([]byte(body), &shaped)
		if resp.StatusCode != 401 || shaped.Type != "error" || shaped.Error.Type != "authentication_error" {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
		}
	}
	// The SDK raises its own authentication error.
	if _, err := r.anthropic("s1").Messages.New(context.Background(), messageParams()); err != nil {
		t.Fatalf("its own token: %v", err)
	}
	r.gw.Close("s1")
	if _, err := r.anthropic("s1").Messages.New(context.Background(), messageParams()); apiStatus(err) != 401 {
		t.Fatalf("a token after its session ended: %v", err)
	}
	if n := len(r.provider.Requests()); n != 1 {
		t.Fatalf("the provider got %d calls, want the one with the right token", n)
	}
	if n := len(r.guard.requests()); n != 1 {
		t.Fatalf("%d decisions: a refused token asked the guard", n)
	}
	// A new session of the same id gets a new token; the old one is dead.
	old := r.tokens["s1"]
	r.tokens["s1"] = r.gw.Open("s1")
	if resp, _ := r.post("s1", "/v1/messages", message, map[string]string{"X-Api-Key": old}); resp.StatusCode != 401 {
		t.Fatalf("the token of the session's last run: %d", resp.StatusCode)
	}
}

// What the agent sends in auth and routing headers never reaches the
// provider: its key is the operator's, its host the provider's; the
// API's own headers pass.
func TestHeadersCannotOverrideTheCredentialOrTheHost(t *testing.T) {
	r := newRig(t, DefaultLimits)
	h := map[string]string{
		"X-Api-Key": r.tokens["s1"], "Authorization": "Bearer " + r.tokens["s1"],
		"Host": "evil.example", "X-Forwarded-Host": "evil.example", "Forwarded": "host=evil.example",
		"X-Forwarded-For": "10.0.0.1", "X-Original-Url": "https://evil.example/v1/messages", "Proxy-Authorization": "Basic eA==",
		"Anthropic-Beta": "prompt-caching-2024-07-31", "Anthropic-Version": "2023-06-01", "Cookie": "a=b",
	}
	if resp, body := r.post("s1", "/v1/messages?beta=true&target=evil", message, h); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	oh := map[string]string{"Authorization": "Bearer " + r.tokens["s1"], "OpenAI-Organization": "org-evil", "OpenAI-Project": "proj-evil",
		"OpenAI-Beta": "assistants=v2"}
	if resp, body := r.post("s1", "/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`, oh); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs := r.provider.Requests()
	a, o := reqs[0], reqs[1]
	if a.Header.Get("X-Api-Key") != r.provider.Keys["anthropic"] || a.Header.Get("Authorization") != "" {
		t.Errorf("anthropic auth: x-api-key %q authorization %q", a.Header.Get("X-Api-Key"), a.Header.Get("Authorization"))
	}
	if o.Header.Get("Authorization") != "Bearer "+r.provider.Keys["openai"] || o.Header.Get("X-Api-Key") != "" {
		t.Errorf("openai auth: %q", o.Header.Get("Authorization"))
	}
	for _, q := range reqs {
		if !strings.HasPrefix(r.provider.URL, "https://"+q.Host) {
			t.Errorf("the provider was asked for host %q", q.Host)
		}
		for _, k := range []string{"X-Forwarded-Host", "Forwarded", "X-Forwarded-For", "X-Original-Url", "Proxy-Authorization", "Cookie",
			"Openai-Organization", "Openai-Project"} {
			if v := q.Header.Get(k); v != "" {
				t.Errorf("%s reached the provider: %q", k, v)
			}
		}
	}
	if a.Header.Get("Anthropic-Beta") != "prompt-caching-2024-07-31" || o.Header.Get("Openai-Beta") != "assistants=v2" {
		t.Errorf("the APIs' own headers did not pass: %v / %v", a.Header, o.Header)
	}
	if a.Query != "beta=true" {
		t.Errorf("query %q, want beta=true alone", a.Query)
	}
}

// Only the served paths are served, POST only, answered in the shape of
// the API the caller speaks.
func TestOnlyTheServedPaths(t *testing.T) {
	r := newRig(t, DefaultLimits)
	for _, path := range []string{"/v1/models", "/v1/messages/batches", "/v1/files", "/v1/embeddings", "/v1/responses/resp_1", "/admin", "/v1/../v1/messages"} {
		resp, body := r.post("s1", path, message, map[string]string{"X-Api-Key": r.tokens["s1"]})
		if resp.StatusCode != 404 || !strings.Contains(body, `"not_found_error"`) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	resp, body := r.post("s1", "/v1/embeddings", `{"model":"x","input":"y"}`, r.bearer("s1"))
	if resp.StatusCode != 404 || !strings.Contains(body, `"unknown_url"`) {
		t.Errorf("openai shape: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/messages", nil)
	req.Header.Set("X-Api-Key", r.tokens["s1"])
	if g, err := r.client("s1").Do(req); err != nil || g.StatusCode != 405 {
		t.Errorf("GET: %v %v", g, err)
	}
	if n := len(r.provider.Requests()); n != 0 {
		t.Fatalf("the provider got %d calls", n)
	}
}

// A body cannot say one thing to the gateway and another to the provider:
// it is read once and forwarded as read; an output bound that is not a
// plain count is refused; none is the gateway's default, written in.
func TestABodyThatLiesAboutItsBound(t *testing.T) {
	r := newRig(t, Limits{MaxBody: 1 << 20, DefaultOutput: 512, MaxOutput: 4096, InputOverhead: 1024, HoldWait: 0, RouteTTL: 0})
	refused := []string{
		`{"model":"claude-sonnet-4-5","max_tokens":"100","messages":[]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":1e3,"messages":[]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":100.0,"messages":[]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":-5,"messages":[]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":99999999999999999999,"messages":[]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":5000,"messages":[]}`, // over MaxOutput
		`{"model":["claude"],"max_tokens":10}`,
		`{"model":"claude-sonnet-4-5","max_tokens":10,"stream":"yes"}`,
		`[1,2]`,
		`{"model":"claude-sonnet-4-5","max_tokens":10`,
	}
	for _, b := range refused {
		resp, body := r.post("s1", "/v1/messages", b, r.bearer("s1"))
		if resp.StatusCode != 400 || !strings.Contains(body, "invalid_request_error") {
			t.Errorf("%s: %d %s", b, resp.StatusCode, body)
		}
	}
	for _, b := range []string{
		`{"model":"gpt-5","max_tokens":10,"max_completion_tokens":4000,"messages":[]}`,
		`{"model":"gpt-5","n":"3","messages":[]}`,
		`{"model":"gpt-5","stream":true,"stream_options":"x","messages":[]}`,
	} {
		if resp, body := r.post("s1", "/v1/chat/completions", b, r.bearer("s1")); resp.StatusCode != 400 {
			t.Errorf("%s: %d %s", b, resp.StatusCode, body)
		}
	}
	if resp, body := r.post("s1", "/v1/responses", `{"model":"gpt-5","input":"x","background":true}`, r.bearer("s1")); resp.StatusCode != 400 {
		t.Errorf("a background response: %d %s", resp.StatusCode, body)
	}
	if n := len(r.provider.Requests()); n != 0 {
		t.Fatalf("the provider got %d refused calls", n)
	}
	accepted := []struct {
		path, body string
		key        string
		reserved   int64
		forwarded  float64
	}{
		// A repeated key: the last is read and the last is forwarded, alone.
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"max_tokens":4000,"messages":[]}`, "max_tokens", 4000, 4000},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":4000,"max_tokens":10,"messages":[]}`, "max_tokens", 10, 10},
		// An escaped key is the same key.
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"max\u005ftokens":3000,"messages":[]}`, "max_tokens", 3000, 3000},
		// None: the default, written in.
		{"/v1/messages", `{"model":"claude-sonnet-4-5","messages":[]}`, "max_tokens", 512, 512},
		{"/v1/chat/completions", `{"model":"gpt-5","messages":[]}`, "max_completion_tokens", 512, 512},
		{"/v1/responses", `{"model":"gpt-5","input":"x"}`, "max_output_tokens", 512, 512},
		// n choices reserve n bounds.
		{"/v1/chat/completions", `{"model":"gpt-5","n":3,"max_tokens":100,"messages":[]}`, "max_tokens", 300, 100},
	}
	for i, c := range accepted {
		resp, body := r.post("s1", c.path, c.body, r.bearer("s1"))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.body, resp.StatusCode, body)
		}
		res := r.models.reservations()[i]
		got := r.provider.Requests()[i]
		if res.GetWorst().GetOutput() != c.reserved || got.Body[c.key] != c.forwarded || strings.Count(got.Raw, `"`+c.key+`"`) != 1 {
			t.Errorf("%s: reserved %d, the provider read %s=%v in %s; want %d and %v",
				c.body, res.GetWorst().GetOutput(), c.key, got.Body[c.key], got.Raw, c.reserved, c.forwarded)
		}
		if res.GetWorst().GetInput() < int64(len(got.Raw)) {
			t.Errorf("%s: input bound %d under the body's %d bytes", c.body, res.GetWorst().GetInput(), len(got.Raw))
		}
	}
	// Too big a body never reaches anyone.
	big := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`
	if resp, body := r.post("s1", "/v1/messages", big, r.bearer("s1")); resp.StatusCode != 413 || !strings.Contains(body, "request_too_large") {
		t.Errorf("a body over the limit: %d %.200s", resp.StatusCode, body)
	}
}

// Refusals come in the provider's error shape, with a status the SDK
// treats right: a denied model is final (403), a held one retryable (429,
// Retry-After, the hold named), a guard that cannot be asked retryable.
func TestRefusalsInTheProvidersShape(t *testing.T) {
	r := newRig(t, Limits{MaxBody: 1 << 20, DefaultOutput: 512, MaxOutput: 4096, InputOverhead: 1024, HoldWait: 1, RouteTTL: 0})
	r.guard.effects["claude-opus-4-1"] = guardv1.Effect_EFFECT_DENY
	r.guard.effects["gpt-5-pro"] = guardv1.Effect_EFFECT_HOLD
	p := messageParams()
	p.Model = "claude-opus-4-1"
	_, err := r.anthropic("s1").Messages.New(context.Background(), p)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 403 || !strings.Contains(ae.Error(), "permission_error") || !strings.Contains(ae.Error(), "fake rule for claude-opus-4-1") {
		t.Fatalf("denied: %v", err)
	}
	cp := chatParams()
	cp.Model = "gpt-5-pro"
	_, err = r.openai("s1").Chat.Completions.New(context.Background(), cp)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || !strings.Contains(oe.Message, "hold_gpt-5-pro") ||
		oe.Response.Header.Get("Retry-After") == "" || oe.Response.Header.Get(HeaderHold) != "hold_gpt-5-pro" || oe.Response.Header.Get("X-Should-Retry") != "true" {
		t.Fatalf("held: %v", err)
	}
	// Approved while it waits: the call goes through at once.
	r.guard.approve = true
	if _, err := r.openai("s1").Chat.Completions.New(context.Background(), cp); err != nil {
		t.Fatalf("approved during the wait: %v", err)
	}
	r.guard.down = true
	_, err = r.anthropic("s1").Messages.New(context.Background(), messageParams())
	if !errors.As(err, &ae) || ae.StatusCode != 529 || !strings.Contains(ae.Error(), "overloaded_error") {
		t.Fatalf("guard down: %v", err)
	}
	resp, body := r.post("s1", "/v1/chat/completions", `{"model":"gpt-5","messages":[]}`, r.bearer("s1"))
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "the guard could not be asked") {
		t.Fatalf("guard down, openai: %d %s", resp.StatusCode, body)
	}
	if n := len(r.provider.Requests()); n != 1 {
		t.Fatalf("the provider got %d calls; want only the approved one", n)
	}
}

// Past the budget the call asks model.budget, whose card says what the
// group spent and on what; allowed, it reserves past the budget citing
// that decision; held past the wait, it is 429 naming the hold.
func TestPastTheBudget(t *testing.T) {
	r := newRig(t, Limits{MaxBody: 1 << 20, DefaultOutput: 512, MaxOutput: 4096, InputOverhead: 1024, HoldWait: 1, RouteTTL: 0})
	r.models.overBudget = true
	_, err := r.anthropic("s1").Messages.New(context.Background(), messageParams())
	if apiStatus(err) != 429 || !strings.Contains(err.Error(), "hold_budget:day") {
		t.Fatalf("held past the budget: %v", err)
	}
	var card *guardv1.DecideRequest
	for _, q := range r.guard.requests() {
		if q.GetAction() == "model.budget" {
			card = q
		}
	}
	if card == nil || !strings.Contains(card.GetCard().GetQuestion(), "990 of 1000 tokens") ||
		!strings.Contains(card.GetCard().GetQuestion(), "anthropic/claude-sonnet-4-5: 3 calls") || card.GetPayload().AsMap()["budget"] != "day" {
		t.Fatalf("the budget card: %v", card)
	}
	r.guard.budget = guardv1.Effect_EFFECT_ALLOW
	if _, err := r.anthropic("s1").Messages.New(context.Background(), messageParams()); err != nil {
		t.Fatalf("allowed past the budget: %v", err)
	}
	res := r.models.reservations()
	last := res[len(res)-1]
	if last.GetOverBudgetDecisionId() == "" || last.GetOverBudgetDecisionId() == last.GetDecisionId() {
		t.Fatalf("the reservation past the budget cites %q", last.GetOverBudgetDecisionId())
	}
	r.guard.budget = guardv1.Effect_EFFECT_DENY
	if _, err := r.anthropic("s1").Messages.New(context.Background(), messageParams()); apiStatus(err) != 403 {
		t.Fatalf("denied past the budget: %v", err)
	}
}

// A stream cut in the middle is settled once, with what was seen and its
// output at the reserved bound; a provider's refusal is settled at
// nothing; an agent that goes away mid-stream is settled once too.
func TestACutStreamIsSettledOnce(t *testing.T) {
	r := newRig(t, DefaultLimits)
	r.provider.Set(3, 0) // message_start, content_block_start, one delta, then cut
	s := r.anthropic("s1").Messages.NewStreaming(context.Background(), messageParams())
	for s.Next() {
	}
	if s.Err() == nil {
		t.Fatal("a cut stream ended without an error")
	}
	got := r.models.settlesOf(t, 1)[0]
	if got.GetComplete() || got.GetUsed().GetInput() != 11 || got.GetUsed().GetCacheRead() != 3 || got.GetUsed().GetOutput() != 1 {
		t.Fatalf("cut: %v (the server puts its output at the bound)", got)
	}
	r.provider.Set(0, 400)
	if _, err := r.openai("s1").Chat.Completions.New(context.Background(), chatParams()); apiStatus(err) != 400 {
		t.Fatalf("the provider's refusal: %v", err)
	}
	if got := r.models.settlesOf(t, 2)[1]; !got.GetComplete() || got.GetUsed().GetInput()+got.GetUsed().GetOutput() != 0 {
		t.Fatalf("a refused call settled at %v", got)
	}
	r.provider.Set(0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	st := r.openai("s1").Chat.Completions.NewStreaming(ctx, chatParams())
	st.Next()
	cancel()
	for st.Next() {
	}
	settles := r.models.settlesOf(t, 3)
	for id, n := range countBy(settles) {
		if n != 1 {
			t.Errorf("reservation %s settled %d times", id, n)
		}
	}
	if len(r.models.reservations()) != 3 {
		t.Fatalf("%d reservations", len(r.models.reservations()))
	}
}

func countBy(s []*guardv1.SettleModelUsageRequest) map[string]int {
	out := map[string]int{}
	for _, x := range s {
		out[x.GetReservationId()]++
	}
	return out
}
