package commands

import (
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// traceArgs are the request fields the baseline reads beyond the facts: the
// group-naming fields (their top-level keys) — never the rest of a request.
func traceArgs(groupFields []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range groupFields {
		k, _, _ := strings.Cut(p, ".")
		if k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// explainer walks the admin baseline: who is calling, the caller group's
// cli_scope, the group allowlist, then the command's access level.
func explainer(r *guardv1.Rule) guard.ExplainFunc {
	return func(in *guard.Input, f guard.Facts, d guard.Decision) guard.Explained {
		var x guard.Explained
		add := func(name, outcome, detail string, facts ...string) {
			x.Checks = append(x.Checks, guard.Check{Name: name, Facts: facts, Outcome: outcome, Detail: detail})
		}
		switch in.ActorKind() {
		case "host":
			add("caller", "allow", "the operator (host) runs every admin command")
			x.WouldChange = []string{"an agent asking → its group's cli_scope and the command's access level decide"}
			return x
		case "agent":
		default:
			outcome := "deny"
			if d.Effect == guard.EffectAllow {
				outcome = "allow"
			}
			add("caller", outcome, guard.ActorInWords(in.Actor)+": "+d.Reason)
			return x
		}
		group, _ := in.AgentGroup()
		scope := CLIScope(f)
		scopeWords := "group " + group + " has cli_scope " + scope
		if !f.Has("cli_scope") {
			scopeWords += " (no container config reads as group)"
		}
		switch scope {
		case "disabled":
			add("cli scope", "deny", scopeWords+": its agents may run no admin command", "cli_scope")
			x.WouldChange = []string{"cli_scope group → the allowlist and the access level decide"}
			return x
		case "group", "global":
			add("cli scope", "pass", scopeWords, "cli_scope")
		default:
			add("cli scope", "deny", scopeWords+": an unknown scope fails closed", "cli_scope")
			return x
		}
		resource := r.GetResource()
		if scope == "group" && resource != "" && !GroupScopedResources[resource] {
			add("allowlist", "deny", "under cli_scope group an agent reaches only groups, sessions, destinations and members, not "+resource)
			x.WouldChange = []string{"cli_scope global for " + group + " → the access level decides"}
			return x
		}
		if d.Effect == guard.EffectDeny {
			add("group arguments", "deny", d.Reason)
			x.WouldChange = []string{"arguments naming only group " + group + " → the access level decides"}
			return x
		}
		switch d.Effect {
		case guard.EffectHold:
			add("access", "hold", r.GetAction()+" is an approval command: "+guard.RuleInWords(d.Rule, d.Scope))
			x.WouldChange = []string{"the operator running it → allow", "an approval → the server replays exactly this request once"}
		default:
			add("access", "allow", r.GetAction()+" is an open command")
		}
		return x
	}
}
