package commands

import (
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// An agent's admin command is explained check by check, and the explanation
// names the check that decided.
func TestAdminCommandsExplainTheirChecks(t *testing.T) {
	cat := guard.NewCatalog()
	if err := Register(cat); err != nil {
		t.Fatal(err)
	}
	agent := &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "g1", SessionId: "s1"}}}
	for _, c := range []struct {
		action, scope string
		payload       map[string]any
		last, outcome string
		change        string
	}{
		{"roles.grant", "group", map[string]any{}, "allowlist", "deny", "cli_scope global for g1"},
		{"members.add", "group", map[string]any{"group": "g1", "user_id": "tg:new"}, "access", "hold", "the operator running it → allow"},
		{"groups.list", "global", map[string]any{}, "access", "allow", ""},
		{"groups.list", "disabled", map[string]any{}, "cli scope", "deny", "cli_scope group"},
	} {
		e, ok := cat.Lookup(c.action)
		if !ok {
			t.Fatalf("%s not in the catalog", c.action)
		}
		in := &guard.Input{Action: c.action, Actor: agent, Payload: c.payload}
		f := guard.NewFacts(map[string]string{"cli_scope": c.scope})
		d, err := e.Baseline(in, f)
		if err != nil {
			t.Fatal(err)
		}
		d.DecidedBy = guard.ByBaseline
		x := guard.Explain(e, in, f, d)
		last := x.GetChecks()[len(x.GetChecks())-1]
		if last.GetName() != c.last || last.GetOutcome() != c.outcome {
			t.Errorf("%s under %s: last check %s/%s, want %s/%s (%v)", c.action, c.scope, last.GetName(), last.GetOutcome(), c.last, c.outcome, x)
		}
		if c.change != "" && (len(x.GetWouldChange()) == 0 || !strings.Contains(strings.Join(x.GetWouldChange(), "; "), c.change)) {
			t.Errorf("%s under %s: would change %v, want %q", c.action, c.scope, x.GetWouldChange(), c.change)
		}
	}
}
