package ncl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A group's model budget (ncl models budget): how much its agents may use
// a day or a month, in tokens or cost, and what a call past it gets (hold
// or deny). In the document it is under the group's models (modelgroup.go
// plans it with the rest of them).

func (a *app) modelBudgetCmd() *cobra.Command {
	return noun("budget", "A group's token and cost budget per day or month",
		"  ncl models budget set --group research --period day --tokens 2000000\n  ncl models budget get --group research",
		a.budgetSet(), a.budgetGet(), a.budgetUnset())
}

func (a *app) budgetSet() *cobra.Command {
	var group, period, cost, onExceed string
	var tokens int64
	cmd := &cobra.Command{
		Use: "set", Short: "Set a group's budget",
		Long: `Set a group's budget per UTC day or month: --tokens (input, output and
cache tokens together) and/or --cost (at the prices of ncl models prices, in
their currency). Before a call is forwarded its worst case is reserved: its
output bound plus its input's size. A call that would pass the budget asks a
human (--on-exceed hold, the default: the group's approvers see what it spent
and on what, and may let it go on once, for the session or for N hours) or is
refused (--on-exceed deny). What was spent in the period already counts.`,
		Example: "  ncl models budget set --group research --period day --tokens 2000000\n" +
			"  ncl models budget set --group research --period month --cost 250 --on-exceed deny",
		Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &guardv1.SetModelBudgetRequest{Group: group, Tokens: tokens}
			var err error
			if req.Period, err = enumword.Parse[guardv1.ModelBudgetPeriod](period); err != nil || req.Period == 0 {
				return usagef("--period %q: want day or month", period)
			}
			if req.CostMicros, err = parseMicros(cost); err != nil {
				return usagef("--cost %q: %v", cost, err)
			}
			if req.OnExceed, err = enumword.Parse[guardv1.Effect](onExceed); err != nil || req.OnExceed == guardv1.Effect_EFFECT_ALLOW {
				return usagef("--on-exceed %q: want hold or deny", onExceed)
			}
			a.groupArgs(&req.Group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				r, err := c.reg.SetModelBudget(ctx, req)
				return r.GetPolicy().GetBudget(), err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringVar(&period, "period", "", "day or month (UTC)")
	cmd.Flags().Int64Var(&tokens, "tokens", 0, "tokens per period (0: no token budget)")
	cmd.Flags().StringVar(&cost, "cost", "0", "cost per period, in the prices' currency (0: no cost budget)")
	cmd.Flags().StringVar(&onExceed, "on-exceed", "hold", "hold or deny")
	required(cmd, "group", "period")
	return cmd
}

func (a *app) budgetGet() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use: "get", Short: "Show a group's budget and what it spent in the current period", Args: none,
		Example: "  ncl models budget get --group research",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				r, err := c.reg.GetModelPolicy(ctx, &guardv1.GetModelPolicyRequest{Group: group})
				if err == nil && r.GetPolicy().GetBudget() == nil {
					return nil, usagef("group %s has no model budget (ncl models budget set)", group)
				}
				return r.GetPolicy().GetBudget(), err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	required(cmd, "group")
	return cmd
}

func (a *app) budgetUnset() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use: "unset", Short: "Remove a group's budget", Args: none,
		Example: "  ncl models budget unset --group research",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&group)
			return a.done(cmd, "model budget removed", func(ctx context.Context, c *clients) error {
				_, err := c.reg.SetModelBudget(ctx, &guardv1.SetModelBudgetRequest{Group: group})
				return err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	required(cmd, "group")
	return cmd
}

// parseMicros reads an amount with up to six decimals as micro-units.
func parseMicros(s string) (int64, error) {
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 6 || strings.HasPrefix(whole, "-") || strings.HasPrefix(whole, "+") {
		return 0, errors.New("want an amount such as 3, 0.30 or 3.75 (up to six decimals)")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > 9_000_000_000_000 {
		return 0, errors.New("want an amount such as 3, 0.30 or 3.75 (up to six decimals)")
	}
	f := int64(0)
	if frac != "" {
		if f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil || f < 0 {
			return 0, errors.New("want an amount such as 3, 0.30 or 3.75 (up to six decimals)")
		}
	}
	return w*1_000_000 + f, nil
}

// modelBudgetViews are how a budget prints: what was spent and reserved of it.
var modelBudgetViews = []render.View{
	render.For[*guardv1.ModelBudget](render.View{
		Cols: []render.Col{
			render.C("PERIOD", func(b *guardv1.ModelBudget) string { return enumword.String(b.GetPeriod()) }),
			render.C("SINCE", func(b *guardv1.ModelBudget) string {
				return b.GetPeriodStart().AsTime().UTC().Format("2006-01-02") + " (UTC)"
			}),
			render.C("TOKENS", func(b *guardv1.ModelBudget) string {
				return spentOf(strconv.FormatInt(b.GetSpentTokens(), 10), strconv.FormatInt(b.GetReservedTokens(), 10), b.GetTokens(), strconv.FormatInt(b.GetTokens(), 10))
			}),
			render.C("COST", func(b *guardv1.ModelBudget) string {
				return spentOf(render.Micros(b.GetSpentCostMicros()), render.Micros(b.GetReservedCostMicros()), b.GetCostMicros(), render.Micros(b.GetCostMicros()))
			}),
			render.C("PAST IT", func(b *guardv1.ModelBudget) string { return enumword.String(b.GetOnExceed()) }),
		},
		ID: render.IDOf(func(b *guardv1.ModelBudget) string { return enumword.String(b.GetPeriod()) }),
	}),
}

type modelBudgetSpec struct {
	Period     string `yaml:"period"`
	Tokens     int64  `yaml:"tokens,omitempty"`
	CostMicros int64  `yaml:"costMicros,omitempty"`
	OnExceed   string `yaml:"onExceed"`
}

func setBudget(group string, b *modelBudgetSpec) func(ctx context.Context, c *clients, book groupBook) error {
	return func(ctx context.Context, c *clients, book groupBook) error {
		req := &guardv1.SetModelBudgetRequest{Group: idOr(book, group)}
		if b != nil {
			var err error
			if req.Period, err = enumword.Parse[guardv1.ModelBudgetPeriod](b.Period); err != nil {
				return fmt.Errorf("group %s: models.budget.period: %w", group, err)
			}
			if req.OnExceed, err = enumword.Parse[guardv1.Effect](b.OnExceed); err != nil {
				return fmt.Errorf("group %s: models.budget.onExceed: %w", group, err)
			}
			req.Tokens, req.CostMicros = b.Tokens, b.CostMicros
		}
		_, err := c.reg.SetModelBudget(ctx, req)
		return err
	}
}

func budgetWords(b *modelBudgetSpec) string {
	if b == nil {
		return "none"
	}
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if b.CostMicros > 0 {
		parts = append(parts, fmt.Sprintf("%d µ", b.CostMicros))
	}
	return fmt.Sprintf("%s a %s, past it %s", strings.Join(parts, " and "), b.Period, b.OnExceed)
}

func budgetLine(b *guardv1.ModelBudget) string {
	if b == nil {
		return "none"
	}
	var parts []string
	if b.GetTokens() > 0 {
		parts = append(parts, fmt.Sprintf("%d/%d tokens", b.GetSpentTokens(), b.GetTokens()))
	}
	if b.GetCostMicros() > 0 {
		parts = append(parts, fmt.Sprintf("%s/%s", render.Micros(b.GetSpentCostMicros()), render.Micros(b.GetCostMicros())))
	}
	return fmt.Sprintf("%s a %s, past it %s", strings.Join(parts, " and "), enumword.String(b.GetPeriod()), enumword.String(b.GetOnExceed()))
}
