package metering

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/store"
)

// budget is a group's budget row (model_budgets) with what a call past it
// gets (container_configs.model_over_budget).
type budget struct {
	Period     string
	Tokens     int64
	Cost       int64
	OverBudget string
}

// budgetSQL reads a budget; its caller adds the WHERE.
const budgetSQL = `SELECT b.period, b.tokens, b.cost_micros, COALESCE(c.model_over_budget, '')
	FROM model_budgets b LEFT JOIN container_configs c USING (agent_group_id)`

// readBudget reads a group's budget; ok false when it has none.
func readBudget(ctx context.Context, q store.Querier, group string) (budget, bool, error) {
	return scanBudget(q.QueryRow(ctx, budgetSQL+` WHERE b.agent_group_id = $1`, group))
}

func scanBudget(row pgx.Row) (b budget, ok bool, err error) {
	err = row.Scan(&b.Period, &b.Tokens, &b.Cost, &b.OverBudget)
	if store.IsNoRows(err) {
		return budget{}, false, nil
	}
	if err != nil {
		return budget{}, false, fmt.Errorf("read a model budget: %w", err)
	}
	return b, true, nil
}

// spendSQL is a group's spend in the period starting $3: its counter when
// one was made, else the usage settled since the start (no call has
// reserved on it yet, so nothing is reserved).
const spendSQL = `SELECT COALESCE(sp.spent_tokens, u.tokens, 0), COALESCE(sp.reserved_tokens, 0),
		COALESCE(sp.spent_cost, u.cost, 0), COALESCE(sp.reserved_cost, 0)
	FROM (SELECT 1) AS one
	LEFT JOIN model_spend sp ON sp.agent_group_id = $1 AND sp.period = $2 AND sp.period_start = $3
	LEFT JOIN LATERAL (SELECT sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens)::bigint AS tokens,
		sum(cost_micros)::bigint AS cost FROM model_usage WHERE agent_group_id = $1 AND day >= $3) u ON true`

// BudgetState is a group's budget with what was spent and is reserved in its
// current period (the database's clock), nil when it has none.
func BudgetState(ctx context.Context, q store.Querier, group string) (*guardv1.ModelBudget, error) {
	b, ok, err := readBudget(ctx, q, group)
	if err != nil || !ok {
		return nil, err
	}
	var now time.Time
	if err := q.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, fmt.Errorf("read the clock: %w", err)
	}
	return budgetState(ctx, q, group, b, modelrule.PeriodStart(b.Period, now))
}

func budgetState(ctx context.Context, q store.Querier, group string, b budget, start time.Time) (*guardv1.ModelBudget, error) {
	out := &guardv1.ModelBudget{Tokens: b.Tokens, CostMicros: b.Cost, PeriodStart: timestamppb.New(start)}
	var err error
	if out.Period, err = enumword.Parse[guardv1.ModelBudgetPeriod](b.Period); err != nil {
		return nil, fmt.Errorf("stored model budget period: %w", err)
	}
	if out.OnExceed, err = enumword.Parse[guardv1.Effect](b.OverBudget); err != nil {
		return nil, fmt.Errorf("stored model_over_budget: %w", err)
	}
	if err := q.QueryRow(ctx, spendSQL, group, b.Period, start).Scan(&out.SpentTokens, &out.ReservedTokens,
		&out.SpentCostMicros, &out.ReservedCostMicros); err != nil {
		return nil, fmt.Errorf("read the model spend of %s: %w", group, err)
	}
	return out, nil
}

// PeriodUsage is what a group used since start, per provider and model,
// most tokens first (an over-budget card's "on what").
func PeriodUsage(ctx context.Context, q store.Querier, group string, start time.Time) ([]*guardv1.ModelUsage, error) {
	rows, err := q.Query(ctx, `SELECT provider, model, sum(calls)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint,
			sum(cache_read_tokens)::bigint, sum(cache_write_tokens)::bigint, sum(cost_micros)::bigint
		FROM model_usage WHERE agent_group_id = $1 AND day >= $2 GROUP BY provider, model
		ORDER BY sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) DESC, provider, model LIMIT 20`, group, start)
	if err != nil {
		return nil, fmt.Errorf("read the model usage of %s: %w", group, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*guardv1.ModelUsage, error) {
		u := &guardv1.ModelUsage{Group: group}
		return u, r.Scan(&u.Provider, &u.Model, &u.Calls, &u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.CostMicros)
	})
}
