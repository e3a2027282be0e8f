// Package modelcalls registers the model gateway's two catalog entries.
//
// model.call is an agent's call of its model, which the runner's model
// gateway forwards (with the provider's credential, which the container
// never holds) only after this decision. The decided resource is {provider,
// model}. A provider the group is not given is denied (structural); else
// the group's model rules and default decide (proto/modelrule), allow when
// nothing is set. model.budget is a call past the group's budget: the
// group's setting holds it for its admins or denies it.
//
// Every fact is the actor's own group's config row, so decisions are served
// from the snapshot. A hold is for the group's admin chain; nothing is
// replayed (the call that was held has been answered by then): its approval
// is used by the session's next identical call, or, approved for a session
// or N hours, becomes a standing grant.
package modelcalls

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// The catalog actions and the hold kinds of their grants.
const (
	CallAction   = modelrule.CallAction
	CallKind     = modelrule.CallKind
	BudgetAction = modelrule.BudgetAction
	BudgetKind   = modelrule.BudgetKind
)

// configFact reads one column of the actor group's config row.
func configFact(column, name, expr string) guard.Fact {
	return guard.Lookup{Table: "container_configs", Key: []guard.KeyEq{{Column: "agent_group_id", Equals: guard.ActorGroup}},
		Column: column, Expr: expr}.Fact(name)
}

// CallEntry is the model.call catalog entry.
func CallEntry() guard.Entry {
	return guard.Entry{
		Action:         CallAction,
		ApprovalAction: CallKind,
		Description:    "an agent calls its model through the runner's gateway (resource provider and model); the group's providers and model rules decide",
		// Every fact is the actor's own group's row.
		Names: func(*guard.Input) []guard.Ref { return []guard.Ref{} },
		Facts: []guard.Fact{
			commands.GroupExistsFact,
			configFact("model_providers", "model_providers", "array_to_string(%s, ',')"),
			configFact("model_rules", "model_rules", ""),
			configFact("model_default", "model_default", ""),
		},
		Precheck: callPrecheck,
		Baseline: callBaseline,
		Explain:  explainCall,
		GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
			p, _ := g.Payload[modelrule.KeyProvider].(string)
			m, _ := g.Payload[modelrule.KeyModel].(string)
			return p == in.Resource[modelrule.KeyProvider] && m == in.Resource[modelrule.KeyModel]
		},
		TraceArgs:       []string{modelrule.KeyKind},
		NextRequestUses: true,
	}
}

// Register adds both entries.
func Register(cat *guard.Catalog) error {
	if err := cat.Register(CallEntry()); err != nil {
		return err
	}
	return cat.Register(BudgetEntry())
}

// callPrecheck refuses a malformed call before any hold, and a payload that
// names another provider or model than the decided resource.
func callPrecheck(in *guard.Input, f guard.Facts) error {
	if _, ok := in.AgentGroup(); ok && !f.Bool("group_exists") {
		return errors.New("model_call failed: agent group not found.")
	}
	provider, model := in.Resource[modelrule.KeyProvider], in.Resource[modelrule.KeyModel]
	if provider != "" {
		if err := modelrule.CheckProvider(provider); err != nil {
			return fmt.Errorf("model_call failed: %v.", err)
		}
	}
	if err := modelrule.CheckModel(model); err != nil {
		return fmt.Errorf("model_call failed: %v.", err)
	}
	if kind := in.Arg(modelrule.KeyKind); kind != "" {
		if err := modelrule.CheckKind(kind); err != nil {
			return fmt.Errorf("model_call failed: %v.", err)
		}
	}
	if in.Arg(modelrule.KeyProvider) != provider || in.Arg(modelrule.KeyModel) != model {
		return errors.New("model_call failed: the payload names another provider or model than the decided resource.")
	}
	return nil
}

// providers is the group's providers (a fact, comma-separated).
func providers(f guard.Facts) []string {
	s := f.Str("model_providers")
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// rules reads the group's rules; rules a writer never stores fail closed.
func rules(f guard.Facts) ([]modelrule.Rule, error) {
	s := f.Str("model_rules")
	if s == "" {
		return nil, nil
	}
	var out []modelrule.Rule
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("the group's model rules do not parse: %w", err)
	}
	return out, nil
}

func callBaseline(in *guard.Input, f guard.Facts) (guard.Decision, error) {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Deny("a model call comes only from an agent's session"), nil
	}
	provider, model := in.Resource[modelrule.KeyProvider], in.Resource[modelrule.KeyModel]
	if provider == "" {
		kind := in.Arg(modelrule.KeyKind)
		if kind == "" {
			kind = "matching"
		}
		return guard.Denyf("group %s is given no %s model provider", group, kind), nil
	}
	if !slices.Contains(providers(f), provider) {
		return guard.Denyf("group %s is not given model provider %s", group, provider), nil
	}
	rs, err := rules(f)
	if err != nil {
		return guard.Decision{}, err
	}
	a := modelrule.Decide(rs, f.Str("model_default"), provider, model)
	call := provider + "/" + model
	why := source(a)
	switch a.Effect {
	case modelrule.EffectAllow:
		return guard.Allow(fmt.Sprintf("model %s is allowed (%s)", call, why)), nil
	case modelrule.EffectDeny:
		// The operator's deny is a gate: audit and warn modes relax it.
		d := guard.Denyf("model %s is denied (%s)", call, why)
		d.Gate = true
		return d, nil
	}
	return guard.Hold(guard.AdminsOfScope(group, ""), guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
		fmt.Sprintf("model %s needs approval (%s)", call, why)), nil
}

// source says where an answer came from, in words.
func source(a modelrule.Answer) string {
	switch {
	case a.Rule != nil:
		return "model rule " + a.Rule.Describe()
	case a.Default:
		return "the group's model default"
	}
	return "no model rule names it; the default is allow"
}
