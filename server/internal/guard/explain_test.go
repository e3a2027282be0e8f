package guard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A logged decision is explained from its trace alone: the facts, the
// resource and the entry's TraceArgs kept when deciding — and nothing else
// of the payload is kept.
func TestTraceKeepsOnlyFactsResourceAndTraceArgs(t *testing.T) {
	e := &Entry{Action: "t.trace", TraceArgs: []string{"name"},
		Baseline: func(in *Input, f Facts) (Decision, error) {
			if f.Str("scope") == "global" && in.Arg("name") != "" {
				return Allow("trusted"), nil
			}
			return Deny("no"), nil
		}}
	in := &Input{Action: "t.trace", Actor: agent, Resource: map[string]string{"to": "g2"},
		Payload: map[string]any{"name": "helper", "text": "private message body"}}
	f := NewFacts(map[string]string{"scope": "global"})
	b := encodeTrace(e, in, f)
	if strings.Contains(string(b), "private") {
		t.Fatalf("trace kept a payload key not in TraceArgs: %s", b)
	}
	cat := NewCatalog()
	e.Explain = func(in *Input, f Facts, d Decision) Explained {
		return Explained{Summary: "name " + in.Arg("name") + " to " + in.Resource["to"] + " with scope " + f.Str("scope"),
			Checks: []Check{{Name: "scope", Facts: []string{"scope"}, Outcome: string(d.Effect)}}}
	}
	cat.MustRegister(*e)
	x := cat.ExplainLogged(Logged{Action: "t.trace", Actor: agent, Effect: EffectAllow, Reason: "trusted", DecidedBy: ByBaseline, Trace: b})
	if x.GetSummary() != "name helper to g2 with scope global" || x.GetChecks()[0].GetFacts()[0].GetValue() != "global" {
		t.Fatalf("explained from the trace: %v", x)
	}
	if encodeTrace(nil, in, f) != nil {
		t.Fatal("a non-catalog decision stored a trace")
	}
}

// Rows logged before traces existed (carried across the migration) still
// explain: the entry, the answer, and a note that the checks are unknown.
func TestExplainLoggedWithoutTrace(t *testing.T) {
	cat := NewCatalog()
	cat.MustRegister(*entry("t.old", "k", Hold(aosG1, guardv1.ApproverScope_APPROVER_SCOPE_GROUP, "held")))
	x := cat.ExplainLogged(Logged{Action: "t.old", Actor: agent, Effect: EffectHold, Reason: "held", DecidedBy: ByBaseline})
	if !strings.Contains(x.GetSummary(), "held because held") || !strings.Contains(x.GetSummary(), "cannot be shown") || len(x.GetChecks()) != 0 {
		t.Fatalf("untraced: %v", x)
	}
	// A guard failure needs no trace to be explained.
	x = cat.ExplainLogged(Logged{Action: "t.old", Actor: agent, Effect: EffectDeny, Reason: ReasonFailClosed, DecidedBy: ByGuardFailure})
	if len(x.GetChecks()) != 1 || x.GetChecks()[0].GetOutcome() != "deny" {
		t.Fatalf("guard failure: %v", x)
	}
	x = cat.ExplainLogged(Logged{Action: "t.unknown", Actor: agent, Effect: EffectAllow, Reason: ReasonNonCatalog, DecidedBy: ByNonCatalog})
	if x.GetEntry().GetInCatalog() || !strings.Contains(x.GetSummary(), "not in the catalog") {
		t.Fatalf("non-catalog: %v", x)
	}
}

// A replay allowed by its grant is explained as the baseline's hold (re-run
// over the same facts) plus the grant that satisfied it; a panicking
// Explain falls back to the facts and the answer instead of failing.
func TestExplainGrantAndPanickingExplain(t *testing.T) {
	e := entry("t.held", "k", Hold(aosG1, guardv1.ApproverScope_APPROVER_SCOPE_GROUP, "needs approval"))
	in := input("t.held")
	in.Grant = "hold_1"
	x := Explain(e, in, Facts{}, Decision{Effect: EffectAllow, Reason: "hold satisfied by approval hold_1", DecidedBy: ByGrant})
	last := x.GetChecks()[len(x.GetChecks())-1]
	if x.GetGrant() != "hold_1" || last.GetName() != "grant" || last.GetOutcome() != "allow" ||
		!strings.Contains(x.GetWouldChange()[0], "needs approval") {
		t.Fatalf("grant: %v", x)
	}
	e.Explain = func(*Input, Facts, Decision) Explained { panic("boom") }
	x = Explain(e, input("t.held"), NewFacts(map[string]string{"a": "1"}), Decision{Effect: EffectHold, Reason: "needs approval", DecidedBy: ByBaseline})
	if len(x.GetChecks()) != 1 || x.GetChecks()[0].GetFacts()[0].GetName() != "a" {
		t.Fatalf("panicking Explain: %v", x)
	}
}

// A hold let through by audit mode is explained as what enforce would have
// answered plus the mode — also when re-explained from the log, where only
// the answer and the trace are kept.
func TestExplainAuditModeLogged(t *testing.T) {
	e := entry("t.gated", "k", Hold(aosG1, guardv1.ApproverScope_APPROVER_SCOPE_GROUP, "needs approval"))
	in := input("t.gated")
	f := NewFacts(map[string]string{modeFact: ModeAudit})
	d := evaluate(e, in, f)
	if d.DecidedBy != ByMode {
		t.Fatalf("fixture: %+v", d)
	}
	dry := Explain(e, in, f, d)
	last := dry.GetChecks()[len(dry.GetChecks())-1]
	if last.GetName() != "mode" || last.GetOutcome() != "allow" || !strings.Contains(dry.GetSummary(), "enforce would hold: needs approval") {
		t.Fatalf("audit mode: %v", dry)
	}
	cat := NewCatalog()
	cat.MustRegister(*e)
	logged := cat.ExplainLogged(Logged{Action: "t.gated", Actor: agent, Effect: d.Effect, Reason: d.Reason, DecidedBy: d.DecidedBy,
		Trace: encodeTrace(e, in, f)})
	if !proto.Equal(logged, dry) {
		t.Fatalf("logged explanation differs from the dry run:\n got %v\nwant %v", logged, dry)
	}
}

// The hand-built trace is valid JSON that reads back exactly, whatever the
// values hold (quotes, newlines, non-ASCII, HTML characters, absent facts).
func TestTraceRoundTrips(t *testing.T) {
	e := &Entry{Action: "t.rt", TraceArgs: []string{"name"}, Facts: []Fact{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	odd := "x\"y\\z\n<é>&\u2028"
	f := NewFacts(map[string]string{"a": odd, modeFact: "audit"})
	f.vals["b"] = nil
	in := &Input{Action: "t.rt", Resource: map[string]string{"to": odd, "k": "v"}, Payload: map[string]any{"name": odd, "secret": "s"}}
	b := encodeTrace(e, in, f)
	var tr Trace
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	// b is NULL: left out of the trace, read back as NULL by ExplainLogged.
	if _, kept := tr.Facts["b"]; kept || *tr.Facts["a"] != odd || *tr.Facts[modeFact] != "audit" || tr.Resource["to"] != odd ||
		tr.Args["name"] != odd || tr.Args["secret"] != nil || len(tr.Facts) != 2 {
		t.Fatalf("round trip: %s → %+v", b, tr)
	}
}

// NULL facts are left out of the trace; a logged decision is still
// explained exactly as when it was decided, the NULL facts named among
// those the baseline read.
func TestALoggedDecisionWithNullFactsExplainsAsDecided(t *testing.T) {
	e := &Entry{Action: "t.nulls", Facts: []Fact{{Name: "a", SQL: "SELECT 1"}, {Name: "b", SQL: "SELECT NULL"}, {Name: "c", SQL: "SELECT NULL"}},
		Baseline: func(in *Input, f Facts) (Decision, error) {
			if f.Has("b") {
				return Decision{Effect: EffectAllow, Reason: "b is set"}, nil
			}
			return Decision{Effect: EffectDeny, Reason: "b is not set"}, nil
		}}
	cat := NewCatalog()
	cat.MustRegister(*e)
	e, _ = cat.Lookup("t.nulls") // as registered: with the mode fact
	f := NewFacts(map[string]string{"a": "1"})
	for _, fact := range e.Facts {
		if fact.Name != "a" {
			f.vals[fact.Name] = nil // as read live: NULL
		}
	}
	agent := &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "g", SessionId: "s"}}}
	in := &Input{Action: "t.nulls", Actor: agent}
	d := Decision{Effect: EffectDeny, Reason: "b is not set", DecidedBy: ByBaseline}
	dry := Explain(e, in, f, d)
	// Every fact but the freezes (named only when a scope is frozen).
	if names := dry.GetChecks()[0].GetFacts(); len(names) != len(e.Facts)-len(freezeScopes) || len(e.Facts) < 3 {
		t.Fatalf("fixture: the dry run names %v, want every fact of %v but the freezes", names, e.Facts)
	}
	trace := encodeTrace(e, in, f)
	if strings.Contains(string(trace), `"b"`) {
		t.Fatalf("trace %s keeps a NULL fact", trace)
	}
	logged := cat.ExplainLogged(Logged{Action: "t.nulls", Actor: agent, Effect: d.Effect, Reason: d.Reason, DecidedBy: d.DecidedBy, Trace: trace})
	if !proto.Equal(logged, dry) {
		t.Fatalf("logged explanation differs from the dry run:\n got %v\nwant %v", logged, dry)
	}
}

// Issue 32: an ALLOW a standing grant gave says so, who approved it and
// until when, and that revoking it holds again.
func TestExplainStandingGrant(t *testing.T) {
	e := &Entry{Action: "x.send", ApprovalAction: "x_send", Baseline: func(*Input, Facts) (Decision, error) {
		return Hold(Exclusive("tg:dana"), guardv1.ApproverScope_APPROVER_SCOPE_GROUP, "held for tg:dana"), nil
	}}
	d := standingDecision(&StandingUse{ID: "sg_1", HoldID: "hold_1", ApprovedBy: []string{"tg:dana"}, Until: time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)})
	x := Explain(e, &Input{Action: "x.send"}, Facts{}, d)
	last := x.GetChecks()[len(x.GetChecks())-1]
	if !strings.Contains(x.GetSummary(), "standing grant sg_1 approved by tg:dana until 2026-12-04T06:00:00Z") ||
		last.GetName() != "standing grant" || last.GetOutcome() != "allow" ||
		len(x.GetWouldChange()) != 1 || !strings.Contains(x.GetWouldChange()[0], "held for tg:dana") {
		t.Fatalf("explanation of a standing-grant ALLOW: %v", x)
	}
}
