// Package meteringtest is the model gateway's test world on a real server:
// a group research with two sessions on runner r1, an owner, an anthropic
// and an openai provider, and the runner's own calls (decide a model call,
// reserve, settle) as its gateway makes them.
package meteringtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Owner approves the group's holds.
const Owner = "telegram:dana"

// The providers' credentials (the secrets the tests look for).
const (
	AnthropicKey = "sk-ant-test-REAL-KEY-0123456789"
	OpenAIKey    = "sk-openai-test-REAL-KEY-9876543210"
)

// World is a server with the model gateway's fixtures.
type World struct {
	Srv    *testserver.Server
	Op     testserver.Clients
	Runner testserver.Clients // runner r1 itself (the gateway's RPCs)
	Agent  testserver.Clients // runner r1 asserting session s1
	Agent2 testserver.Clients // runner r1 asserting session s2
	Ctx    context.Context
	Group  string
}

// New starts the server and makes the world. fixtures put runners r1 and
// r2 and sessions s1 and s2 of the group ($1) on r1 in place: the test's
// own statements (the tables are other packages' to write).
func New(t *testing.T, fixtures ...string) *World {
	t.Helper()
	srv := testserver.Start(t)
	ctx := context.Background()
	w := &World{Srv: srv, Op: srv.Operator(t), Ctx: ctx}
	g, err := w.Op.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	w.Group = g.GetGroup().GetId()
	for _, q := range fixtures {
		if _, err := srv.Pool.Exec(ctx, q, w.Group); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := w.Op.Registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: Owner}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Op.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: Owner, Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*guardv1.SetModelProviderRequest{
		{Name: "anthropic", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC, Credential: ptr(AnthropicKey)},
		{Name: "openai", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI, BaseUrl: "https://llm.example/v1", Credential: ptr(OpenAIKey)},
	} {
		if _, err := w.Op.Registry.SetModelProvider(ctx, p); err != nil {
			t.Fatalf("SetModelProvider %s: %v", p.GetName(), err)
		}
	}
	if _, err := w.Op.Registry.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: w.Group, Providers: []string{"anthropic", "openai"}}); err != nil {
		t.Fatal(err)
	}
	tok := srv.Token(t, "runner", "r1", "")
	w.Runner = testserver.ClientsFor(srv.Conn(t, tok, ""))
	w.Agent = testserver.ClientsFor(srv.Conn(t, tok, "s1"))
	w.Agent2 = testserver.ClientsFor(srv.Conn(t, tok, "s2"))
	return w
}

func ptr(s string) *string { return &s }

// CallRequest is a model.call request as the runner's gateway sends it.
func CallRequest(t testing.TB, session, provider, model, kind string) *guardv1.DecideRequest {
	t.Helper()
	p, err := structpb.NewStruct(map[string]any{modelrule.KeyProvider: provider, modelrule.KeyModel: model, modelrule.KeyKind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return &guardv1.DecideRequest{Action: modelrule.CallAction, Payload: p,
		Resource: map[string]string{modelrule.KeyProvider: provider, modelrule.KeyModel: model},
		Card: &guardv1.HoldCard{Title: "Model " + provider + "/" + model, Question: "call?",
			DedupKey: "model_call:" + provider + "/" + model, Kind: modelrule.CallKind, Payload: p},
		RequestId: fmt.Sprintf("%s:model-%d", session, nextID())}
}

// BudgetRequest is a model.budget request as the gateway sends it.
func BudgetRequest(t testing.TB, session, period string) *guardv1.DecideRequest {
	t.Helper()
	p, err := structpb.NewStruct(map[string]any{modelrule.KeyBudget: period})
	if err != nil {
		t.Fatal(err)
	}
	return &guardv1.DecideRequest{Action: modelrule.BudgetAction, Payload: p, Resource: map[string]string{modelrule.KeyBudget: period},
		Card: &guardv1.HoldCard{Title: "Past the budget", Question: "go on?", DedupKey: "model_budget:" + period,
			Kind: modelrule.BudgetKind, Payload: p},
		RequestId: fmt.Sprintf("%s:budget-%d", session, nextID())}
}

var ids atomic.Int64

func nextID() int64 { return ids.Add(1) }

// Decide asks as c and fails the test on an error.
func (w *World) Decide(t testing.TB, c testserver.Clients, req *guardv1.DecideRequest) *guardv1.DecideResponse {
	t.Helper()
	resp, err := c.Guard.Decide(w.Ctx, req)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return resp
}

// Allowed is an ALLOW of a call of provider's model from session s1.
func (w *World) Allowed(t testing.TB, provider, model string) string {
	t.Helper()
	kind := modelrule.KindAnthropic
	if provider == "openai" {
		kind = modelrule.KindOpenAI
	}
	r := w.Decide(t, w.Agent, CallRequest(t, "s1", provider, model, kind))
	if r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("model call %s/%s: %v, want ALLOW", provider, model, r.GetDecision())
	}
	return r.GetDecisionId()
}

// Reserve reserves as runner r1.
func (w *World) Reserve(session, decision, provider, model string, in, out int64, past string) (*guardv1.ReserveModelUsageResponse, error) {
	return w.Runner.Registry.ReserveModelUsage(w.Ctx, &guardv1.ReserveModelUsageRequest{SessionId: session, DecisionId: decision,
		Provider: provider, Model: model, Worst: &guardv1.ModelTokens{Input: in, Output: out}, OverBudgetDecisionId: past})
}

// Settle settles as runner r1.
func (w *World) Settle(id string, used *guardv1.ModelTokens, complete bool) (*guardv1.SettleModelUsageResponse, error) {
	return w.Runner.Registry.SettleModelUsage(w.Ctx, &guardv1.SettleModelUsageRequest{ReservationId: id, Used: used, Complete: complete})
}

// Budget sets the group's budget.
func (w *World) Budget(t testing.TB, period guardv1.ModelBudgetPeriod, tokens, cost int64, onExceed guardv1.Effect) {
	t.Helper()
	if _, err := w.Op.Registry.SetModelBudget(w.Ctx, &guardv1.SetModelBudgetRequest{Group: w.Group, Period: period, Tokens: tokens,
		CostMicros: cost, OnExceed: onExceed}); err != nil {
		t.Fatalf("SetModelBudget: %v", err)
	}
}

// Policy reads the group's model policy as the operator.
func (w *World) Policy(t testing.TB) *guardv1.ModelPolicy {
	t.Helper()
	p, err := w.Op.Registry.GetModelPolicy(w.Ctx, &guardv1.GetModelPolicyRequest{Group: w.Group})
	if err != nil {
		t.Fatal(err)
	}
	return p.GetPolicy()
}

// Approve approves a hold as the owner.
func (w *World) Approve(t testing.TB, hold string) {
	t.Helper()
	if _, err := w.Op.Approvals.Resolve(w.Ctx, &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: Owner}); err != nil {
		t.Fatalf("approve %s: %v", hold, err)
	}
}
