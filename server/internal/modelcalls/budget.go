package modelcalls

import (
	"errors"
	"fmt"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// BudgetEntry is the model.budget catalog entry: a model call the budget's
// reservation refused. The runner asks it only then; its ALLOW lets that
// call reserve past the budget (Registry.ReserveModelUsage cites it, once).
// The resource is the budget's period alone, so an approval for N hours
// (a standing grant) matches every later call of the group past it.
func BudgetEntry() guard.Entry {
	return guard.Entry{
		Action:         BudgetAction,
		ApprovalAction: BudgetKind,
		Description:    "an agent's model call would pass its group's token or cost budget (resource the budget's period); the group's setting holds or denies it",
		Names:          func(*guard.Input) []guard.Ref { return []guard.Ref{} },
		Facts: []guard.Fact{
			commands.GroupExistsFact,
			configFact("model_over_budget", "model_over_budget", ""),
		},
		Precheck: budgetPrecheck,
		Baseline: budgetBaseline,
		Explain:  explainBudget,
		GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
			b, _ := g.Payload[modelrule.KeyBudget].(string)
			return b == in.Resource[modelrule.KeyBudget]
		},
		TraceArgs:       []string{modelrule.KeyBudget},
		NextRequestUses: true,
	}
}

func budgetPrecheck(in *guard.Input, f guard.Facts) error {
	if _, ok := in.AgentGroup(); ok && !f.Bool("group_exists") {
		return errors.New("model_budget failed: agent group not found.")
	}
	if err := modelrule.CheckPeriod(in.Resource[modelrule.KeyBudget]); err != nil {
		return fmt.Errorf("model_budget failed: %v.", err)
	}
	if in.Arg(modelrule.KeyBudget) != in.Resource[modelrule.KeyBudget] || len(in.Payload) != 1 {
		return errors.New("model_budget failed: the payload is not the decided resource.")
	}
	return nil
}

func budgetBaseline(in *guard.Input, f guard.Facts) (guard.Decision, error) {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Deny("a model call comes only from an agent's session"), nil
	}
	period := in.Resource[modelrule.KeyBudget]
	switch f.Str("model_over_budget") {
	case modelrule.EffectHold:
		return guard.Hold(guard.AdminsOfScope(group, ""), guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
			fmt.Sprintf("the group's %s model budget is spent: going past it needs approval", budgetWord(period))), nil
	case modelrule.EffectDeny:
		// The operator's setting is a gate: audit and warn modes relax it.
		d := guard.Denyf("the group's %s model budget is spent, and calls past it are denied", budgetWord(period))
		d.Gate = true
		return d, nil
	}
	return guard.Denyf("group %s has no model budget to go past", group), nil
}

func budgetWord(period string) string {
	if period == modelrule.PeriodMonth {
		return "monthly"
	}
	return "daily"
}
