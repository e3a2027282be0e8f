package modelcalls_test

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/metering/meteringtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fixtures are runners r1 and r2, and sessions s1 and s2 of the world's
// group ($1) on r1.
var fixtures = []string{
	`INSERT INTO runners (id, host, lease_expires_at) SELECT id, id, now() + interval '1 hour' FROM unnest(ARRAY['r1', 'r2']) AS id WHERE $1::text <> ''`,
	`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', $1, 'r1'), ('s2', $1, 'r1')`,
}

const (
	allow = guardv1.Effect_EFFECT_ALLOW
	hold  = guardv1.Effect_EFFECT_HOLD
	deny  = guardv1.Effect_EFFECT_DENY
)

func effect(r *guardv1.DecideResponse) guardv1.Effect { return r.GetDecision().GetEffect() }

func rule(t *testing.T, w *meteringtest.World, provider, model string, e guardv1.Effect) {
	t.Helper()
	if _, err := w.Op.Registry.SetModelRule(w.Ctx, &guardv1.SetModelRuleRequest{Group: w.Group, Provider: provider, Model: model, Effect: e}); err != nil {
		t.Fatalf("SetModelRule %s/%s: %v", provider, model, err)
	}
}

// A group's providers and rules decide: a provider it is not given is
// denied whatever the rules say; of the rules naming a model the most
// restrictive answers; a model no rule names gets the default (allow until
// set).
func TestProvidersAndRulesDecide(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	rule(t, w, "anthropic", "claude-*", allow)
	rule(t, w, "anthropic", "claude-opus-*", hold)
	rule(t, w, "anthropic", "claude-opus-4-1", deny)
	rule(t, w, "openai", "*", allow)
	cases := []struct {
		provider, model, kind string
		want                  guardv1.Effect
		reason                string
	}{
		{"anthropic", "claude-sonnet-4-5", "anthropic", allow, "model rule anthropic/claude-*"},
		{"anthropic", "claude-opus-4", "anthropic", hold, "anthropic/claude-opus-*"},
		{"anthropic", "claude-opus-4-1", "anthropic", deny, "anthropic/claude-opus-4-1"},
		{"anthropic", "mistral", "anthropic", allow, "the default is allow"},
		{"openai", "gpt-5", "openai", allow, "openai/*"},
		{"elsewhere", "gpt-5", "openai", deny, "is not given model provider elsewhere"},
		{"", "gpt-5", "openai", deny, "is given no openai model provider"},
	}
	for _, c := range cases {
		r := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", c.provider, c.model, c.kind))
		if effect(r) != c.want || !strings.Contains(r.GetDecision().GetReason(), c.reason) {
			t.Errorf("%s/%s: %v %q, want %v naming %q", c.provider, c.model, effect(r), r.GetDecision().GetReason(), c.want, c.reason)
		}
	}
	if _, err := w.Op.Registry.SetModelDefault(w.Ctx, &guardv1.SetModelDefaultRequest{Group: w.Group, Effect: deny}); err != nil {
		t.Fatal(err)
	}
	if r := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "anthropic", "mistral", "anthropic")); effect(r) != deny || r.GetHoldId() != "" {
		t.Errorf("default deny: %v", r.GetDecision())
	}
	if _, err := w.Op.Registry.SetModelProviders(w.Ctx, &guardv1.SetModelProvidersRequest{Group: w.Group, Providers: []string{"openai"}}); err != nil {
		t.Fatal(err)
	}
	if r := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "anthropic", "claude-sonnet-4-5", "anthropic")); effect(r) != deny ||
		!strings.Contains(r.GetDecision().GetReason(), "not given model provider anthropic") {
		t.Errorf("a provider taken from the group: %v", r.GetDecision())
	}
	pol := w.Policy(t)
	if len(pol.GetRules()) != 4 || pol.GetDefaultEffect() != deny || strings.Join(pol.GetProviders(), ",") != "openai" {
		t.Fatalf("GetModelPolicy = %v", pol)
	}
	if _, err := w.Op.Registry.UnsetModelRule(w.Ctx, &guardv1.UnsetModelRuleRequest{Group: w.Group, Provider: "openai", Model: "*"}); err != nil {
		t.Fatal(err)
	}
	if r := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "openai", "gpt-5", "openai")); effect(r) != deny {
		t.Errorf("after unset, the default: %v", r.GetDecision())
	}
}

// Malformed calls and settings are refused before any hold.
func TestMalformedRefused(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	rule(t, w, "anthropic", "*", hold)
	for _, m := range []string{"", "has space", "claude-*", "x\x7f"} {
		r := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "anthropic", m, "anthropic"))
		if effect(r) != deny || r.GetHoldId() != "" || r.GetDecision().GetDecidedBy() != "precheck" {
			t.Errorf("model %q: %v hold %q, want a precheck deny", m, r.GetDecision(), r.GetHoldId())
		}
	}
	req := meteringtest.CallRequest(t, "s1", "anthropic", "claude-sonnet-4-5", "anthropic")
	req.Payload.Fields[modelrule.KeyModel] = structpb.NewStringValue("claude-opus-4-1")
	if r := w.Decide(t, w.Agent, req); effect(r) != deny || r.GetHoldId() != "" {
		t.Errorf("a payload naming another model: %v", r.GetDecision())
	}
	for _, bad := range []*guardv1.SetModelRuleRequest{
		{Group: w.Group, Provider: "anthropic", Model: "*-mini", Effect: allow},
		{Group: w.Group, Provider: "Anthropic", Model: "x", Effect: allow},
		{Group: w.Group, Provider: "anthropic", Model: "x", Effect: guardv1.Effect_EFFECT_UNSPECIFIED},
		{Group: "ag_nope", Provider: "anthropic", Model: "x", Effect: allow},
	} {
		_, err := w.Op.Registry.SetModelRule(w.Ctx, bad)
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.NotFound {
			t.Errorf("SetModelRule(%v) = %v, want InvalidArgument or NotFound", bad, err)
		}
	}
	// Two providers of one kind, or one that does not exist.
	if _, err := w.Op.Registry.SetModelProvider(w.Ctx, &guardv1.SetModelProviderRequest{Name: "anthropic-eu",
		Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC}); err != nil {
		t.Fatal(err)
	}
	for _, ps := range [][]string{{"anthropic", "anthropic-eu"}, {"nope"}} {
		_, err := w.Op.Registry.SetModelProviders(w.Ctx, &guardv1.SetModelProvidersRequest{Group: w.Group, Providers: ps})
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.NotFound {
			t.Errorf("SetModelProviders(%v) = %v", ps, err)
		}
	}
}

// A held model is asked once per session; its approval is used by the
// session's next call of it, once; another session is asked again.
func TestApprovalUsedByTheNextCallOnce(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	rule(t, w, "anthropic", "claude-opus-*", hold)
	call := func(c *guardv1.DecideRequest) *guardv1.DecideResponse { return w.Decide(t, w.Agent, c) }
	first := call(meteringtest.CallRequest(t, "s1", "anthropic", "claude-opus-4", "anthropic"))
	again := call(meteringtest.CallRequest(t, "s1", "anthropic", "claude-opus-4", "anthropic"))
	if effect(first) != hold || first.GetHoldId() == "" || again.GetHoldId() != first.GetHoldId() {
		t.Fatalf("held twice: %v / %v, want one hold", first, again)
	}
	w.Approve(t, first.GetHoldId())
	if r := w.Decide(t, w.Agent2, meteringtest.CallRequest(t, "s2", "anthropic", "claude-opus-4", "anthropic")); effect(r) != hold {
		t.Fatalf("another session used s1's approval: %v", r.GetDecision())
	}
	used := call(meteringtest.CallRequest(t, "s1", "anthropic", "claude-opus-4", "anthropic"))
	if effect(used) != allow || !strings.Contains(used.GetDecision().GetReason(), first.GetHoldId()) {
		t.Fatalf("next call: %v, want ALLOW naming hold %s", used.GetDecision(), first.GetHoldId())
	}
	if r := call(meteringtest.CallRequest(t, "s1", "anthropic", "claude-opus-4", "anthropic")); effect(r) != hold || r.GetHoldId() == first.GetHoldId() {
		t.Fatalf("a second call after a once-approval: %v, want a new hold", r)
	}
	if r := call(meteringtest.CallRequest(t, "s1", "anthropic", "claude-opus-4-5", "anthropic")); effect(r) != hold {
		t.Fatalf("another model is another question: %v", r.GetDecision())
	}
}

// A frozen group's calls are denied, an allowed model included, and no
// mode relaxes the freeze or a provider the group is not given; audit mode
// relaxes the operator's deny and logs what enforce would do.
func TestFreezeAndModes(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	rule(t, w, "anthropic", "claude-opus-4-1", deny)
	if _, err := w.Op.Registry.SetActionSettings(w.Ctx, &guardv1.SetActionSettingsRequest{Action: modelrule.CallAction,
		Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT}); err != nil {
		t.Fatal(err)
	}
	r := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "anthropic", "claude-opus-4-1", "anthropic"))
	if effect(r) != allow || r.GetDecision().GetWouldEffect() != deny {
		t.Fatalf("audit: %v, want ALLOW that would deny", r.GetDecision())
	}
	if r := w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "elsewhere", "claude-opus-4-1", "anthropic")); effect(r) != deny {
		t.Fatalf("audit relaxed a provider the group is not given: %v", r.GetDecision())
	}
	if _, err := w.Op.Registry.Freeze(w.Ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.Group, Reason: "incident"}); err != nil {
		t.Fatal(err)
	}
	r = w.Decide(t, w.Agent, meteringtest.CallRequest(t, "s1", "anthropic", "claude-sonnet-4-5", "anthropic"))
	if effect(r) != deny || r.GetDecision().GetDecidedBy() != "freeze" {
		t.Fatalf("frozen group: %v", r.GetDecision())
	}
}

// Past the budget: the group's setting holds (approved once: the next
// call past it goes on, once; for N hours: every call of the group's
// sessions) or denies.
func TestBudgetHoldsForTheGroupsAdmins(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	if r := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", "day")); effect(r) != deny ||
		!strings.Contains(r.GetDecision().GetReason(), "no model budget") {
		t.Fatalf("no budget: %v", r.GetDecision())
	}
	w.Budget(t, guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_DAY, 1000, 0, guardv1.Effect_EFFECT_UNSPECIFIED)
	h := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", "day"))
	if effect(h) != hold || h.GetHoldId() == "" {
		t.Fatalf("past the budget: %v, want a hold", h)
	}
	w.Approve(t, h.GetHoldId())
	if r := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", "day")); effect(r) != allow {
		t.Fatalf("after the approval: %v", r.GetDecision())
	}
	h2 := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", "day"))
	if effect(h2) != hold {
		t.Fatalf("once means once: %v", h2.GetDecision())
	}
	if _, err := w.Op.Approvals.Resolve(w.Ctx, &guardv1.ResolveRequest{Id: h2.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE,
		AsUser: meteringtest.Owner, StandingFor: durationpb.New(3600e9)}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"s1", "s2", "s1"} {
		client := w.Agent
		if c == "s2" {
			client = w.Agent2
		}
		if r := w.Decide(t, client, meteringtest.BudgetRequest(t, c, "day")); effect(r) != allow {
			t.Fatalf("standing grant, call %d: %v", i, r.GetDecision())
		}
	}
	w.Budget(t, guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_DAY, 1000, 0, deny)
	if r := w.Decide(t, w.Agent, meteringtest.BudgetRequest(t, "s1", "day")); effect(r) != deny || r.GetHoldId() != "" {
		t.Fatalf("on_exceed deny: %v", r.GetDecision())
	}
}

// An agent's own change of its model settings is an admin command: held.
func TestAgentChangingItsModelSettingsIsHeld(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	_, err := w.Agent.Registry.SetModelRule(w.Ctx, &guardv1.SetModelRuleRequest{Group: w.Group, Provider: "anthropic", Model: "*", Effect: allow})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("agent SetModelRule = %v, want FailedPrecondition (held)", err)
	}
	_, err = w.Agent.Registry.SetModelBudget(w.Ctx, &guardv1.SetModelBudgetRequest{Group: w.Group})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("agent removing its budget = %v, want FailedPrecondition (held)", err)
	}
	_, err = w.Agent.Registry.SetModelProvider(w.Ctx, &guardv1.SetModelProviderRequest{Name: "mine", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("agent SetModelProvider = %v, want PermissionDenied (operator only)", err)
	}
	if len(w.Policy(t).GetRules()) != 0 {
		t.Fatal("a held change was applied")
	}
}

// The why page explains a model call in words.
func TestExplainSaysWhichRule(t *testing.T) {
	w := meteringtest.New(t, fixtures...)
	rule(t, w, "anthropic", "claude-opus-*", hold)
	resp, err := w.Op.Guard.Decide(w.Ctx, &guardv1.DecideRequest{Action: modelrule.CallAction, DryRun: true,
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: w.Group, SessionId: "s1"}}},
		Resource: map[string]string{modelrule.KeyProvider: "anthropic", modelrule.KeyModel: "claude-opus-4"},
		Payload:  meteringtest.CallRequest(t, "s1", "anthropic", "claude-opus-4", "anthropic").GetPayload()})
	if err != nil {
		t.Fatal(err)
	}
	x := resp.GetExplanation()
	text := x.GetSummary()
	for _, c := range x.GetChecks() {
		text += " | " + c.GetDetail()
	}
	text += " | " + strings.Join(x.GetWouldChange(), " | ")
	for _, want := range []string{"held: model call anthropic/claude-opus-4", "model rule anthropic/claude-opus-* says hold", "--effect allow"} {
		if !strings.Contains(text, want) {
			t.Errorf("explanation %q lacks %q", text, want)
		}
	}
}
