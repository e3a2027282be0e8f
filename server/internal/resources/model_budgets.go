package resources

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/store"
)

// A group's model budget (migration 0430): tokens and, optionally, cost per
// UTC day or month (model_budgets), and what a call past it gets, hold (an
// approver may let it go on) or deny — the fact of model.budget, in the
// group's config row. What was spent is metering's: its counters start
// from the usage already settled in the period, so a budget set at noon
// counts the morning's calls.

type budgetSetting struct {
	period, onExceed string
	tokens, cost     int64
}

// SetModelBudget sets a group's budget, or with no period removes it.
func (s *Service) SetModelBudget(ctx context.Context, req *guardv1.SetModelBudgetRequest) (_ *guardv1.SetModelBudgetResponse, err error) {
	defer store.Faulted(&err, "model budget")
	b, err := checkSetModelBudget(req)
	if err != nil {
		return nil, err
	}
	p, err := s.changeModels(ctx, req.GetGroup(), func(tx pgx.Tx, p *modelPolicy) error {
		if b.period == "" {
			if _, err := tx.Exec(ctx, `DELETE FROM model_budgets WHERE agent_group_id = $1`, req.GetGroup()); err != nil {
				return fmt.Errorf("remove the model budget of %s: %w", req.GetGroup(), err)
			}
			p.OverBudget = ""
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO model_budgets (agent_group_id, period, tokens, cost_micros) VALUES ($1, $2, $3, $4)
			ON CONFLICT (agent_group_id) DO UPDATE SET period = $2, tokens = $3, cost_micros = $4, updated_at = now()`,
			req.GetGroup(), b.period, b.tokens, b.cost); err != nil {
			return fmt.Errorf("set the model budget of %s: %w", req.GetGroup(), err)
		}
		p.OverBudget = b.onExceed
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetModelBudgetResponse{Policy: p}, nil
}

func checkSetModelBudget(r *guardv1.SetModelBudgetRequest) (budgetSetting, error) {
	var b budgetSetting
	if err := required("group", r.GetGroup()); err != nil {
		return b, err
	}
	period, err := enumColumn("period", r.GetPeriod())
	if err != nil || period == "" {
		return b, err // no period: remove the budget
	}
	if r.GetTokens() < 0 || r.GetCostMicros() < 0 {
		return b, invalid("tokens", "a budget is not negative")
	}
	if r.GetTokens() == 0 && r.GetCostMicros() == 0 {
		return b, invalid("tokens", "a budget sets tokens, cost_micros or both (remove it with no period)")
	}
	onExceed, err := enumColumn("on_exceed", r.GetOnExceed())
	if err != nil {
		return b, err
	}
	switch onExceed {
	case "":
		onExceed = modelrule.EffectHold
	case modelrule.EffectHold, modelrule.EffectDeny:
	default:
		return b, invalid("on_exceed", "hold (an approver may let calls go on past it) or deny")
	}
	return budgetSetting{period: period, onExceed: onExceed, tokens: r.GetTokens(), cost: r.GetCostMicros()}, nil
}
