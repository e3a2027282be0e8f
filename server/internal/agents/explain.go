package agents

import "github.com/clawguard/clawguard/server/internal/guard"

// explain: only an explicit global cli_scope creates directly; anything
// else holds for the group's admins.
func explain(in *guard.Input, f guard.Facts, d guard.Decision) guard.Explained {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Explained{Checks: []guard.Check{{Name: "agent actor", Outcome: "deny",
			Detail: "create_agent comes only from an agent's container; the actor is " + guard.ActorInWords(in.Actor)}}}
	}
	scope := f.Str("cli_scope")
	if !f.Has("cli_scope") {
		scope = "missing (read as group)"
	}
	if d.Effect == guard.EffectAllow {
		return guard.Explained{
			Summary: "allowed because group " + group + " has cli_scope global (trusted)",
			Checks: []guard.Check{{Name: "cli scope", Facts: []string{"cli_scope"}, Outcome: "allow",
				Detail: "group " + group + " is trusted with cli_scope global"}},
			WouldChange: []string{"cli_scope group (or no container config) → hold for the admins of " + group},
		}
	}
	return guard.Explained{
		Summary: "held because group " + group + " has cli_scope " + scope + "; cli_scope global → allow",
		Checks: []guard.Check{{Name: "cli scope", Facts: []string{"cli_scope"}, Outcome: "hold",
			Detail: "cli_scope is " + scope + ": only an explicit global scope creates agents without approval"}},
		WouldChange: []string{"cli_scope global for " + group + " → allow"},
	}
}
