package metering_test

import (
	"os"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/metering/meteringtest"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fixtures are runners r1 and r2, and sessions s1 and s2 of the world's
// group ($1) on r1.
var fixtures = []string{
	`INSERT INTO runners (id, host, lease_expires_at) SELECT id, id, now() + interval '1 hour' FROM unnest(ARRAY['r1', 'r2']) AS id WHERE $1::text <> ''`,
	`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', $1, 'r1'), ('s2', $1, 'r1')`,
}

const day = guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_DAY

func tokens(in, out, cr, cw int64) *guardv1.ModelTokens {
	return &guardv1.ModelTokens{Input: in, Output: out, CacheRead: cr, CacheWrite: cw}
}

// usage is the group's usage rows by provider/model.
func usage(t *testing.T, w *meteringtest.World) map[string]*guardv1.ModelUsage {
	t.Helper()
	resp, err := w.Op.Registry.ListModelUsage(w.Ctx, &guardv1.ListModelUsageRequest{Group: w.Group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*guardv1.ModelUsage{}
	for _, u := range resp.GetUsage() {
		out[u.GetProvider()+"/"+u.GetModel()] = u
	}
	return out
}

// A call reserves its worst case, settles once to what the provider
// reported (priced at the operator's prices), and lands per group and
// model; a second settle counts nothing.
func TestReserveSettleOnceAndUsagePerModel(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	if _, err := w.Op.Registry.SetModelPrice(w.Ctx, &guardv1.SetModelPriceRequest{Price: &guardv1.ModelPrice{Provider: "anthropic", Model: "claude-*",
		InputMicros: 3_000_000, OutputMicros: 15_000_000, CacheReadMicros: 300_000, CacheWriteMicros: 3_750_000}}); err != nil {
		t.Fatal(err)
	}
	w.Budget(t, day, 1_000_000, 0, guardv1.Effect_EFFECT_HOLD)
	id := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	res, err := w.Reserve("s1", id, "anthropic", "claude-sonnet-4-5", 5000, 1000, "")
	if err != nil || res.GetOverBudget() || res.GetReservationId() != id {
		t.Fatalf("Reserve = %v, %v", res, err)
	}
	b := w.Policy(t).GetBudget()
	if b.GetReservedTokens() != 6000 || b.GetReservedCostMicros() != 5000*3750000/1e6+1000*15 || b.GetSpentTokens() != 0 {
		t.Fatalf("after the reservation: %v", b)
	}
	s, err := w.Settle(id, tokens(1000, 200, 50, 10), true)
	if err != nil || !s.GetSettled() {
		t.Fatalf("Settle = %v, %v", s, err)
	}
	if s, err := w.Settle(id, tokens(1000, 200, 50, 10), true); err != nil || s.GetSettled() {
		t.Fatalf("second Settle = %v, %v; want settled=false", s, err)
	}
	b = w.Policy(t).GetBudget()
	wantCost := int64(3000 + 3000 + 15 + 38) // 1000 in, 200 out, 50 cache read, 10 cache write
	if b.GetReservedTokens() != 0 || b.GetSpentTokens() != 1260 || b.GetSpentCostMicros() != wantCost || b.GetReservedCostMicros() != 0 {
		t.Fatalf("after the settle: %v, want 1260 tokens and %d µ spent, nothing reserved", b, wantCost)
	}
	u := usage(t, w)["anthropic/claude-sonnet-4-5"]
	if u.GetCalls() != 1 || u.GetInputTokens() != 1000 || u.GetOutputTokens() != 200 || u.GetCacheReadTokens() != 50 ||
		u.GetCacheWriteTokens() != 10 || u.GetCostMicros() != wantCost {
		t.Fatalf("usage = %v", u)
	}
}

// A budget past what a 32-bit number holds reserves like any other.
func TestALargeBudget(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	w.Budget(t, guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_MONTH, 5_000_000_000, 3_000_000_000_000, guardv1.Effect_EFFECT_HOLD)
	id := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	if res, err := w.Reserve("s1", id, "anthropic", "claude-sonnet-4-5", 3_000_000_000, 100, ""); err != nil || res.GetOverBudget() {
		t.Fatalf("Reserve under a large budget: %v %v", res, err)
	}
	if b := w.Policy(t).GetBudget(); b.GetReservedTokens() != 3_000_000_100 {
		t.Fatalf("reserved: %v", b)
	}
}

// N calls racing for a budget never overshoot it: exactly as many as fit
// reserve, the rest are told they are over budget.
func TestRacingReservationsNeverOvershoot(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	w.Budget(t, day, 10_000, 0, guardv1.Effect_EFFECT_HOLD)
	const n = 24
	ids := make([]string, n)
	for i := range ids {
		ids[i] = w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	}
	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		reserved, ob int
	)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := w.Reserve("s1", id, "anthropic", "claude-sonnet-4-5", 700, 300, "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("Reserve: %v", err)
			case res.GetOverBudget():
				ob++
			default:
				reserved++
			}
		}()
	}
	wg.Wait()
	b := w.Policy(t).GetBudget()
	if reserved != 10 || ob != n-10 || b.GetReservedTokens() != 10_000 {
		t.Fatalf("%d reserved, %d over budget, %d tokens reserved; want 10, %d, 10000", reserved, ob, b.GetReservedTokens(), n-10)
	}
}

// Past the budget the call is refused with what the group spent and on
// what; an ALLOW of model.budget (approved) lets it reserve past it, once.
func TestPastTheBudgetWithAnApproval(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	w.Budget(t, day, 1000, 0, guardv1.Effect_EFFECT_HOLD)
	first := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	if _, err := w.Reserve("s1", first, "anthropic", "claude-sonnet-4-5", 500, 400, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Settle(first, tokens(500, 400, 0, 0), true); err != nil {
		t.Fatal(err)
	}
	call := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	res, err := w.Reserve("s1", call, "anthropic", "claude-sonnet-4-5", 100, 100, "")
	if err != nil || !res.GetOverBudget() || res.GetReservationId() != "" {
		t.Fatalf("over the budget: %v, %v", res, err)
	}
	if b := res.GetBudget(); b.GetSpentTokens() != 900 || b.GetTokens() != 1000 || len(res.GetPeriodUsage()) != 1 ||
		res.GetPeriodUsage()[0].GetModel() != "claude-sonnet-4-5" || res.GetPeriodUsage()[0].GetCalls() != 1 {
		t.Fatalf("the over-budget answer: %v", res)
	}
	h := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", "day"))
	if h.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("model.budget: %v", h.GetDecision())
	}
	// A hold is no ALLOW to cite.
	if _, err := w.Reserve("s1", call, "anthropic", "claude-sonnet-4-5", 100, 100, h.GetDecisionId()); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("citing a HOLD: %v", err)
	}
	w.Approve(t, h.GetHoldId())
	ok := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", "day"))
	res, err = w.Reserve("s1", call, "anthropic", "claude-sonnet-4-5", 100, 100, ok.GetDecisionId())
	if err != nil || res.GetOverBudget() || res.GetReservationId() != call {
		t.Fatalf("with the approval: %v, %v", res, err)
	}
	again := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	if _, err := w.Reserve("s1", again, "anthropic", "claude-sonnet-4-5", 100, 100, ok.GetDecisionId()); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("one approval let a second call past the budget: %v", err)
	}
}

// A reservation cites exactly its decision: an ALLOW of the session, of
// model.call, for that provider and model, unused, on the runner hosting
// the session.
func TestCitationsAreBound(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	id := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	other := w.Decide(t, w.Agent2, meteringtest.CallRequest(t, "s2", "anthropic", "claude-sonnet-4-5", "anthropic")).GetDecisionId()
	denied := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "elsewhere", "x", "anthropic")).GetDecisionId()
	cases := []struct {
		name                              string
		session, decision, provider, mode string
		want                              codes.Code
	}{
		{"another session's decision", "s1", other, "anthropic", "claude-sonnet-4-5", codes.PermissionDenied},
		{"a deny", "s1", denied, "elsewhere", "x", codes.FailedPrecondition},
		{"another model", "s1", id, "anthropic", "claude-opus-4-1", codes.PermissionDenied},
		{"another provider", "s1", id, "openai", "claude-sonnet-4-5", codes.PermissionDenied},
		{"no such decision", "s1", "dec_nope", "anthropic", "claude-sonnet-4-5", codes.FailedPrecondition},
		{"a session of no runner", "s9", id, "anthropic", "claude-sonnet-4-5", codes.PermissionDenied},
	}
	for _, c := range cases {
		if _, err := w.Reserve(c.session, c.decision, c.provider, c.mode, 10, 10, ""); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := w.Reserve("s1", id, "anthropic", "claude-sonnet-4-5", 10, 10, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reserve("s1", id, "anthropic", "claude-sonnet-4-5", 10, 10, ""); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a decision reserved twice: %v", err)
	}
	// Another runner's token cannot reserve, route or settle for r1's session.
	r2c := testserver.ClientsFor(w.Srv.Conn(t, w.Srv.Token(t, "runner", "r2", ""), ""))
	if _, err := r2c.Registry.GetModelRoute(w.Ctx, &guardv1.GetModelRouteRequest{SessionId: "s1", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another runner's route: %v", err)
	}
	if _, err := r2c.Registry.SettleModelUsage(w.Ctx, &guardv1.SettleModelUsageRequest{ReservationId: id, Used: tokens(1, 1, 0, 0), Complete: true}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another runner's settle: %v", err)
	}
	// An agent its runner speaks for gets none of it.
	if _, err := w.Agent.Registry.GetModelRoute(w.Ctx, &guardv1.GetModelRouteRequest{SessionId: "s1", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an agent's route: %v", err)
	}
}

// The route carries the credential to the hosting runner alone; no other
// answer carries it, to anyone; a new credential is read at once.
func TestCredentialIsWriteOnly(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	route, err := w.Runner.Registry.GetModelRoute(w.Ctx, &guardv1.GetModelRouteRequest{SessionId: "s1", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI})
	if err != nil || route.GetProvider() != "openai" || route.GetBaseUrl() != "https://llm.example/v1" || route.GetCredential() != meteringtest.OpenAIKey {
		t.Fatalf("route = %v, %v", route, err)
	}
	list, err := w.Op.Registry.ListModelProviders(w.Ctx, &guardv1.ListModelProvidersRequest{})
	if err != nil || len(list.GetProviders()) != 2 || !list.GetProviders()[0].GetHasCredential() || list.GetProviders()[0].GetCredentialSetAt() == nil {
		t.Fatalf("ListModelProviders = %v, %v", list, err)
	}
	set, err := w.Op.Registry.SetModelProvider(w.Ctx, &guardv1.SetModelProviderRequest{Name: "openai", Credential: strPtr("sk-rotated-0000")})
	if err != nil {
		t.Fatal(err)
	}
	for what, answer := range map[string]string{"list": list.String(), "set": set.String(), "policy": w.Policy(t).String()} {
		for _, key := range []string{meteringtest.AnthropicKey, meteringtest.OpenAIKey, "sk-rotated-0000"} {
			if strings.Contains(answer, key) {
				t.Errorf("%s answer carries a credential", what)
			}
		}
	}
	route, err = w.Runner.Registry.GetModelRoute(w.Ctx, &guardv1.GetModelRouteRequest{SessionId: "s1", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI})
	if err != nil || route.GetCredential() != "sk-rotated-0000" || route.GetBaseUrl() != "https://llm.example/v1" {
		t.Fatalf("rotated: %v, %v (the base URL kept)", route, err)
	}
	if _, err := w.Op.Registry.DeleteModelProvider(w.Ctx, &guardv1.DeleteModelProviderRequest{Name: "openai"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("deleting a provider a group is given: %v", err)
	}
	for _, bad := range []*guardv1.SetModelProviderRequest{
		{Name: "x", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI, BaseUrl: "ftp://x"},
		{Name: "x", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI, BaseUrl: "https://user:pw@x"},
		{Name: "x", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI, Credential: strPtr("two words")},
		{Name: "x"},
		{Name: "openai", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC},
	} {
		_, err := w.Op.Registry.SetModelProvider(w.Ctx, bad)
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.FailedPrecondition {
			t.Errorf("SetModelProvider(%s) = %v", bad.GetName(), err)
		} else if strings.Contains(err.Error(), "two words") {
			t.Errorf("a refused credential is echoed: %v", err)
		}
	}
}

func strPtr(s string) *string { return &s }

// A cut stream settles with what was seen and its output at the reserved
// bound, once; a reservation the database lost is recorded again by its
// settle; a reservation nobody settled is swept to its worst case.
func TestCutLostAndSweptReservations(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	cut := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	if _, err := w.Reserve("s1", cut, "anthropic", "claude-sonnet-4-5", 2000, 500, ""); err != nil {
		t.Fatal(err)
	}
	if s, err := w.Settle(cut, tokens(1200, 40, 0, 0), false); err != nil || !s.GetSettled() {
		t.Fatalf("cut settle: %v %v", s, err)
	}
	lost := w.Allowed(t, "openai", "gpt-5")
	if _, err := w.Reserve("s1", lost, "openai", "gpt-5", 100, 100, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Srv.Pool.Exec(w.Ctx, `DELETE FROM model_reservations WHERE id = $1`, lost); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Settle(lost, tokens(80, 20, 0, 0), true); status.Code(err) != codes.NotFound {
		t.Fatalf("a lost reservation settled without its session: %v", err)
	}
	s, err := w.Runner.Registry.SettleModelUsage(w.Ctx, &guardv1.SettleModelUsageRequest{ReservationId: lost, Used: tokens(80, 20, 0, 0),
		Complete: true, SessionId: "s1", Worst: tokens(100, 100, 0, 0)})
	if err != nil || !s.GetSettled() {
		t.Fatalf("the lost reservation's settle: %v %v", s, err)
	}
	swept := w.Allowed(t, "anthropic", "claude-haiku-4-5")
	if _, err := w.Reserve("s1", swept, "anthropic", "claude-haiku-4-5", 300, 70, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Srv.Pool.Exec(w.Ctx, `UPDATE model_reservations SET created_at = now() - interval '61 minutes' WHERE id = $1`, swept); err != nil {
		t.Fatal(err)
	}
	n, err := w.Srv.Deps().Models.Sweep(w.Ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if n, _ := w.Srv.Deps().Models.Sweep(w.Ctx); n != 0 {
		t.Fatalf("swept twice: %d", n)
	}
	u := usage(t, w)
	for key, want := range map[string][2]int64{
		"anthropic/claude-sonnet-4-5": {1200, 500}, // seen input, output at its bound
		"openai/gpt-5":                {80, 20},
		"anthropic/claude-haiku-4-5":  {300, 70}, // its worst case
	} {
		if got := u[key]; got.GetCalls() != 1 || got.GetInputTokens() != want[0] || got.GetOutputTokens() != want[1] {
			t.Errorf("%s: %v, want one call of %v", key, got, want)
		}
	}
	if s, err := w.Settle(swept, tokens(1, 1, 0, 0), true); err != nil || s.GetSettled() {
		t.Fatalf("a swept reservation settled again: %v %v", s, err)
	}
}

// A budget set in the middle of a period counts what was settled before
// it; removing it removes the over-budget setting too.
func TestBudgetCountsTheDaysEarlierCalls(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	id := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	if _, err := w.Reserve("s1", id, "anthropic", "claude-sonnet-4-5", 800, 800, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Settle(id, tokens(600, 300, 0, 0), true); err != nil {
		t.Fatal(err)
	}
	w.Budget(t, day, 1000, 0, guardv1.Effect_EFFECT_DENY)
	if b := w.Policy(t).GetBudget(); b.GetSpentTokens() != 900 || b.GetOnExceed() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("budget set after a call: %v", b)
	}
	next := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	if res, err := w.Reserve("s1", next, "anthropic", "claude-sonnet-4-5", 50, 60, ""); err != nil || !res.GetOverBudget() {
		t.Fatalf("900 + 110 > 1000: %v %v", res, err)
	}
	if res, err := w.Reserve("s1", next, "anthropic", "claude-sonnet-4-5", 50, 50, ""); err != nil || res.GetOverBudget() {
		t.Fatalf("900 + 100 ≤ 1000: %v %v", res, err)
	}
	if _, err := w.Op.Registry.SetModelBudget(w.Ctx, &guardv1.SetModelBudgetRequest{Group: w.Group}); err != nil {
		t.Fatal(err)
	}
	if p := w.Policy(t); p.GetBudget() != nil {
		t.Fatalf("removed budget: %v", p.GetBudget())
	}
	if r := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", modelrule.PeriodDay)); r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("model.budget without a budget: %v", r.GetDecision())
	}
}

// A group without a budget reserves nothing (its route says so): a call is
// recorded by its settle, once, citing its own model.call ALLOW.
func TestAnUnreservedCallIsRecordedByItsSettle(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	route := func() *guardv1.GetModelRouteResponse {
		r, err := w.Runner.Registry.GetModelRoute(w.Ctx, &guardv1.GetModelRouteRequest{SessionId: "s1", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if route().GetHasBudget() {
		t.Fatal("a group without a budget: has_budget")
	}
	id := w.Allowed(t, "anthropic", "claude-sonnet-4-5")
	settle := func(id, session string) (*guardv1.SettleModelUsageResponse, error) {
		return w.Runner.Registry.SettleModelUsage(w.Ctx, &guardv1.SettleModelUsageRequest{ReservationId: id, Used: tokens(40, 10, 0, 0),
			Complete: true, SessionId: session, Worst: tokens(2000, 300, 0, 0)})
	}
	if s, err := settle(id, "s1"); err != nil || !s.GetSettled() {
		t.Fatalf("settle of an unreserved call: %v %v", s, err)
	}
	if s, err := settle(id, "s1"); err != nil || s.GetSettled() {
		t.Fatalf("settled twice: %v %v", s, err)
	}
	if u := usage(t, w)["anthropic/claude-sonnet-4-5"]; u.GetCalls() != 1 || u.GetInputTokens() != 40 || u.GetOutputTokens() != 10 {
		t.Fatalf("usage: %v", u)
	}
	other := w.Decide(t, w.Agent2, meteringtest.CallRequest(t, "s2", "anthropic", "claude-sonnet-4-5", "anthropic")).GetDecisionId()
	if _, err := settle(other, "s1"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("recording another session's call: %v", err)
	}
	denied := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "elsewhere", "x", "anthropic")).GetDecisionId()
	if _, err := settle(denied, "s1"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("recording a denied call: %v", err)
	}
	w.Budget(t, day, 1000, 0, guardv1.Effect_EFFECT_HOLD)
	if !route().GetHasBudget() {
		t.Fatal("a group with a budget: no has_budget")
	}
}
