package commands

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// Only the three known cli_scope values mean anything: a value the code
// does not know (a typo written past the CHECK, a future migration's new
// scope) must deny, not skip the group-scope checks as if it were global.
func TestUnknownCLIScopeDenies(t *testing.T) {
	var rule *guardv1.Rule
	for _, m := range rpcdecl.AdminMethods(rpcdecl.Services...) {
		if m.Rule.GetAction() == "roles.grant" {
			rule = m.Rule
		}
	}
	if rule == nil {
		t.Fatal("roles.grant not found")
	}
	in := &guard.Input{Action: "roles.grant", Payload: map[string]any{"user_id": "tg:mallory", "role": "ROLE_OWNER"},
		Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "g1", SessionId: "s1"}}}}
	for _, scope := range []string{"GLOBAL", "project", "global "} {
		if d := Baseline(rule, nil, in, guard.NewFacts(map[string]string{"cli_scope": scope})); d.Effect != guard.EffectDeny {
			t.Errorf("cli_scope %q: %s (%s), want deny", scope, d.Effect, d.Reason)
		}
	}
	if d := Baseline(rule, nil, in, guard.NewFacts(map[string]string{"cli_scope": "global"})); d.Effect != guard.EffectHold {
		t.Errorf("cli_scope global: %s, want hold", d.Effect)
	}
}
