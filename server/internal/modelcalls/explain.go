package modelcalls

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// explainCall says which check answered and what would change the answer.
func explainCall(in *guard.Input, f guard.Facts, d guard.Decision) guard.Explained {
	group, ok := in.AgentGroup()
	if !ok {
		return notAnAgent(in)
	}
	provider, model := in.Resource[modelrule.KeyProvider], in.Resource[modelrule.KeyModel]
	call := provider + "/" + model
	given := providers(f)
	var x guard.Explained
	x.Summary = fmt.Sprintf("%s: model call %s", verbed(d.Effect), call)
	pc := guard.Check{Name: "provider given", Facts: []string{"model_providers"}, Outcome: "pass",
		Detail: fmt.Sprintf("group %s is given %s (of %s)", group, provider, strings.Join(given, ", "))}
	if !slices.Contains(given, provider) {
		pc.Outcome = "deny"
		pc.Detail = fmt.Sprintf("group %s is given %s; not %q", group, orNone(given), provider)
		x.Checks = []guard.Check{pc}
		x.WouldChange = []string{fmt.Sprintf("ncl models use --group %s --provider %s (with the group's other providers) → the rules decide", group, orName(provider))}
		return x
	}
	rs, err := rules(f)
	if err != nil {
		x.Checks = []guard.Check{pc, {Name: "model rules", Facts: []string{"model_rules"}, Outcome: "deny", Detail: err.Error()}}
		return x
	}
	a := modelrule.Decide(rs, f.Str("model_default"), provider, model)
	detail := "no model rule names " + call + ": the built-in default, allow"
	switch {
	case a.Rule != nil:
		detail = fmt.Sprintf("model rule %s says %s (of the rules naming %s the most restrictive answers)", a.Rule.Describe(), a.Effect, call)
	case a.Default:
		detail = fmt.Sprintf("no model rule names %s: the group's default, %s", call, a.Effect)
	}
	x.Checks = []guard.Check{pc, {Name: "model rule", Facts: []string{"model_rules", "model_default"}, Outcome: a.Effect, Detail: detail}}
	set := fmt.Sprintf("ncl models set --group %s --provider %s --model %s", group, provider, model)
	for _, e := range []string{modelrule.EffectAllow, modelrule.EffectHold, modelrule.EffectDeny} {
		if e != a.Effect {
			x.WouldChange = append(x.WouldChange, fmt.Sprintf("%s --effect %s → %s (unless a more restrictive rule also names it)", set, e, e))
		}
	}
	return x
}

// explainBudget says what the group's setting for calls past its budget is.
func explainBudget(in *guard.Input, f guard.Facts, d guard.Decision) guard.Explained {
	group, ok := in.AgentGroup()
	if !ok {
		return notAnAgent(in)
	}
	setting := f.Str("model_over_budget")
	detail := fmt.Sprintf("group %s has no model budget", group)
	if setting != "" {
		detail = fmt.Sprintf("group %s's budget says calls past it get %s", group, setting)
	}
	x := guard.Explained{
		Summary: fmt.Sprintf("%s: a model call past the %s budget", verbed(d.Effect), budgetWord(in.Resource[modelrule.KeyBudget])),
		Checks:  []guard.Check{{Name: "over budget", Facts: []string{"model_over_budget"}, Outcome: string(d.Effect), Detail: detail}},
	}
	for _, e := range []string{modelrule.EffectHold, modelrule.EffectDeny} {
		if e != setting {
			x.WouldChange = append(x.WouldChange, fmt.Sprintf("ncl models budget set --group %s ... --on-exceed %s → %s", group, e, e))
		}
	}
	return x
}

func notAnAgent(in *guard.Input) guard.Explained {
	return guard.Explained{Checks: []guard.Check{{Name: "agent actor", Outcome: "deny",
		Detail: "only an agent's session calls a model; the actor is " + guard.ActorInWords(in.Actor)}}}
}

func verbed(e guard.Effect) string {
	switch e {
	case guard.EffectAllow:
		return "allowed"
	case guard.EffectDeny:
		return "denied"
	}
	return "held"
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "no provider"
	}
	return strings.Join(list, ", ")
}

func orName(p string) string {
	if p == "" {
		return "<provider>"
	}
	return p
}
