package ncl

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A group's model settings: which providers its agents may use, the rules
// and default that decide each call (model.call: the most restrictive
// rule naming a call answers, a model no rule names gets the default,
// allow when none is set) and its budget (a call past it asks model.budget).

func (a *app) modelsUse() *cobra.Command {
	var group string
	var providers []string
	var noProvider bool
	cmd := &cobra.Command{
		Use: "use", Short: "Set the providers a group's agents may use (one of each kind)",
		Long: `Set the providers a group's agents may call (replacing the list): at most one
of each kind, for a call's route picks it — /v1/messages the group's anthropic
provider, /v1/chat/completions and /v1/responses its openai one. A call of a
provider the group is not given is denied. --none takes them all away.`,
		Example: "  ncl models use --group research --provider anthropic --provider openai\n  ncl models use --group research --none",
		Args:    none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if noProvider == (len(providers) > 0) {
				return usagef("give --provider (once per provider) or --none")
			}
			a.groupArgs(&group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				r, err := c.reg.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: group, Providers: providers})
				return r.GetPolicy(), err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringArrayVar(&providers, "provider", nil, "a provider (repeat for each)")
	cmd.Flags().BoolVar(&noProvider, "none", false, "no provider")
	required(cmd, "group")
	return cmd
}

func (a *app) modelsList() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use: "list", Short: "Show a group's providers, model rules, default and budget", Args: none,
		Example: "  ncl models list --group research\n  ncl models list --group research -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				r, err := c.reg.GetModelPolicy(ctx, &guardv1.GetModelPolicyRequest{Group: group})
				return r.GetPolicy(), err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	required(cmd, "group")
	return cmd
}

func (a *app) modelsSet() *cobra.Command {
	var group, provider, model, effect string
	cmd := &cobra.Command{
		Use: "set", Short: "Set the effect of a provider's model (or models) for a group",
		Long: `Set what a call of the group's agents to a provider's model gets: allow
forwards it, hold asks the group's approvers (the call waits a short while,
then is answered 429 naming the hold; once approved the agent calls again),
deny refuses it (403 in the provider's error shape). --model is a model
("claude-opus-4-1") or a prefix ending in * ("claude-opus-*", "*" for every
model of the provider). A rule of the same provider and model is replaced; of
the rules naming a call the most restrictive answers.`,
		Example: "  ncl models set --group research --provider anthropic --model 'claude-*' --effect allow\n" +
			"  ncl models set --group research --provider anthropic --model 'claude-opus-*' --effect hold",
		Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := parseMCPEffect(effect)
			if err != nil || e == guardv1.Effect_EFFECT_UNSPECIFIED {
				return usagef("--effect %q: want allow, hold or deny (ncl models unset removes a rule)", effect)
			}
			a.groupArgs(&group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				_, err := c.reg.SetModelRule(ctx, &guardv1.SetModelRuleRequest{Group: group, Provider: provider, Model: model, Effect: e})
				return &guardv1.ModelRule{Provider: provider, Model: model, Effect: e}, err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringVar(&provider, "provider", "", "the provider")
	cmd.Flags().StringVar(&model, "model", "", "a model, or a prefix ending in *")
	cmd.Flags().StringVar(&effect, "effect", "", "allow, hold or deny")
	required(cmd, "group", "provider", "model", "effect")
	return cmd
}

func (a *app) modelsUnset() *cobra.Command {
	var group, provider, model string
	cmd := &cobra.Command{
		Use: "unset", Short: "Remove one of a group's model rules", Args: none,
		Example: "  ncl models unset --group research --provider anthropic --model 'claude-opus-*'",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&group)
			return a.done(cmd, "model rule "+provider+"/"+model+" removed", func(ctx context.Context, c *clients) error {
				_, err := c.reg.UnsetModelRule(ctx, &guardv1.UnsetModelRuleRequest{Group: group, Provider: provider, Model: model})
				return err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringVar(&provider, "provider", "", "the rule's provider")
	cmd.Flags().StringVar(&model, "model", "", "the rule's model, as set")
	required(cmd, "group", "provider", "model")
	return cmd
}

func (a *app) modelsDefault() *cobra.Command {
	var group, effect string
	cmd := &cobra.Command{
		Use: "default", Short: "Set what a model no rule of the group names gets",
		Long: `Set the effect of calls of models none of the group's rules name: allow
(the default when none is set: the group was given the provider on purpose),
hold, or deny (only the models the rules allow are called). --effect none
removes the setting.`,
		Example: "  ncl models default --group research --effect deny", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := parseMCPEffect(effect)
			if err != nil {
				return err
			}
			a.groupArgs(&group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				r, err := c.reg.SetModelDefault(ctx, &guardv1.SetModelDefaultRequest{Group: group, Effect: e})
				return r.GetPolicy(), err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringVar(&effect, "effect", "", "allow, hold, deny, or none (remove the setting: allow)")
	required(cmd, "group", "effect")
	return cmd
}

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
