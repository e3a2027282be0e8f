package guard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Port of the seed's guard.test.ts: the baseline is the decision, grant
// semantics, fail-closed posture — on the pure part of Decide.

var agent = &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag-1", SessionId: "sess-1"}}}

func input(action string) *Input {
	return &Input{Action: action, Actor: agent, Payload: map[string]any{}}
}

func entry(action, approval string, d Decision) *Entry {
	return &Entry{Action: action, ApprovalAction: approval, Baseline: func(*Input, Facts) (Decision, error) { return d, nil }}
}

var aosG1 = AdminsOfScope("ag-1", "")

func TestBaselineIsTheDecision(t *testing.T) {
	if d := evaluate(nil, input("test.unregistered-read"), Facts{}); d.Effect != EffectAllow || d.Reason != ReasonNonCatalog {
		t.Fatalf("non-catalog: %+v", d)
	}
	if d := evaluate(entry("t.allow1", "", Allow("ok")), input("t.allow1"), Facts{}); d.Effect != EffectAllow || d.DecidedBy != ByBaseline {
		t.Fatalf("allow: %+v", d)
	}
	d := evaluate(entry("t.hold1", "", Hold(aosG1, guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL, "needs approval")), input("t.hold1"), Facts{})
	if d.Effect != EffectHold || d.Rule.GetAdminsOfScope().GetAgentGroupId() != "ag-1" || d.Scope != guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL {
		t.Fatalf("hold: %+v", d)
	}
	if d := evaluate(entry("t.deny1", "", Deny("structurally unauthorized")), input("t.deny1"), Facts{}); d.Effect != EffectDeny || d.Reason != "structurally unauthorized" {
		t.Fatalf("deny: %+v", d)
	}
}

func TestFailClosed(t *testing.T) {
	cases := map[string]*Entry{
		"panicking baseline": {Action: "t.f1", Baseline: func(*Input, Facts) (Decision, error) { panic("boom") }},
		"erroring baseline":  {Action: "t.f2", Baseline: func(*Input, Facts) (Decision, error) { return Allow("x"), errors.New("db") }},
		"hold without rule":  entry("t.f3", "", Decision{Effect: EffectHold, Reason: "x"}),
		"unknown effect":     entry("t.f4", "", Decision{Effect: "maybe"}),
		"panicking precheck": {Action: "t.f5", Precheck: func(*Input, Facts) error { panic("boom") }, Baseline: entry("", "", Allow("x")).Baseline},
	}
	for name, e := range cases {
		if d := evaluate(e, input(e.Action), Facts{}); d.Effect != EffectDeny || d.Reason != ReasonFailClosed {
			t.Errorf("%s: %+v, want fail-closed deny", name, d)
		}
	}
}

func TestPrecheckDeniesBeforeBaseline(t *testing.T) {
	ran := false
	e := &Entry{Action: "t.p1", Precheck: func(*Input, Facts) error { return errors.New("name is required") },
		Baseline: func(*Input, Facts) (Decision, error) { ran = true; return Hold(aosG1, 1, "x"), nil }}
	d := evaluate(e, input("t.p1"), Facts{})
	if d.Effect != EffectDeny || d.DecidedBy != ByPrecheck || !strings.Contains(d.Reason, "name is required") || ran {
		t.Fatalf("precheck: %+v ran=%v", d, ran)
	}
}

func TestGrants(t *testing.T) {
	live := func(kind string) *GrantRow {
		return &GrantRow{ID: "h1", Kind: kind, Status: "approved", AgentGroupID: "ag-1"}
	}
	held := entry("t.g1", "g1_approved", Hold(aosG1, guardv1.ApproverScope_APPROVER_SCOPE_GROUP, "b"))
	in := input("t.g1")
	in.Grant = "h1"
	cases := []struct {
		name string
		e    *Entry
		g    *GrantRow
		want Effect
	}{
		{"valid live grant satisfies a hold", held, live("g1_approved"), EffectAllow},
		{"dead grant (no row) refuses", held, nil, EffectDeny},
		{"pending hold refuses", held, &GrantRow{Kind: "g1_approved", Status: "pending"}, EffectDeny},
		{"rejected hold refuses", held, &GrantRow{Kind: "g1_approved", Status: "rejected"}, EffectDeny},
		{"consumed grant refuses", held, &GrantRow{Kind: "g1_approved", Status: "approved", Consumed: true}, EffectDeny},
		{"grant of another action does not transfer", held, live("other_action"), EffectDeny},
		{"grant of another group does not transfer", held, &GrantRow{Kind: "g1_approved", Status: "approved", AgentGroupID: "ag-2"}, EffectDeny},
		{"grant held for another catalog action does not transfer", held, &GrantRow{Kind: "g1_approved", Status: "approved", AgentGroupID: "ag-1", CatalogAction: "t.other"}, EffectDeny},
		{"grant held for this action and session satisfies", held, &GrantRow{Kind: "g1_approved", Status: "approved", AgentGroupID: "ag-1", CatalogAction: "t.g1", SessionID: "sess-1"}, EffectAllow},
		{"grant held for another session does not transfer", held, &GrantRow{Kind: "g1_approved", Status: "approved", AgentGroupID: "ag-1", SessionID: "sess-other"}, EffectDeny},
		{"entry without approval action never accepts", entry("t.g2", "", Hold(aosG1, 1, "b")), live(""), EffectDeny},
		{"binding can refuse", &Entry{Action: "t.g5", ApprovalAction: "g1_approved", Baseline: held.Baseline,
			GrantMatches: func(*GrantRow, *Input) bool { return false }}, live("g1_approved"), EffectDeny},
		{"panicking binding refuses", &Entry{Action: "t.g6", ApprovalAction: "g1_approved", Baseline: held.Baseline,
			GrantMatches: func(*GrantRow, *Input) bool { panic("x") }}, live("g1_approved"), EffectDeny},
	}
	for _, c := range cases {
		d := checkGrant(c.e, in, c.g)
		if d.Effect != c.want {
			t.Errorf("%s: %+v, want %s", c.name, d, c.want)
		}
		if d.Effect == EffectDeny && d.Reason != ReasonInvalidGrant {
			t.Errorf("%s: reason %q", c.name, d.Reason)
		}
	}
}

func TestCatalogRegister(t *testing.T) {
	c := NewCatalog()
	e := Entry{Action: "t.dup", Baseline: entry("", "", Allow("x")).Baseline}
	if err := c.Register(e); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(e); err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Fatalf("duplicate registration: %v", err)
	}
	for _, bad := range []Entry{
		{Action: "NoDots", Baseline: e.Baseline},
		{Action: "t.nobaseline"},
		{Action: "t.facts", Baseline: e.Baseline, Facts: []Fact{{Name: "a", SQL: "1"}, {Name: "a", SQL: "2"}}},
	} {
		if err := c.Register(bad); err == nil {
			t.Errorf("%s registered; want an error", bad.Action)
		}
	}
	if got := c.Actions(); len(got) != 1 || got[0] != "t.dup" {
		t.Fatalf("actions %v", got)
	}
}

func TestActorJSONIsValidJSON(t *testing.T) {
	for _, a := range []*guardv1.Actor{
		nil,
		{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}},
		{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: `g"1\`, SessionId: "s\n1"}}},
		{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "telegram:ünï\"code"}}},
	} {
		var v map[string]any
		if err := json.Unmarshal([]byte(actorJSON(a)), &v); err != nil || len(v) != 1 {
			t.Errorf("%v → %s: %v", a, actorJSON(a), err)
		}
	}
}

// After Close, a late Decide (a background loop finishing) fails closed
// instead of panicking on the closed batcher.
func TestDecideAfterCloseDenies(t *testing.T) {
	c := NewCatalog()
	e := NewEngine(c, nil, Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.Close()
	resp, err := e.Decide(context.Background(), &Request{Input: Input{Action: "some.read", Actor: agent}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || resp.GetDecision().GetReason() != ReasonFailClosed {
		t.Fatalf("after close: %v", resp)
	}
}
