package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
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

// groupModelViews are how a group's model rules and settings print.
var groupModelViews = []render.View{
	render.For[*guardv1.ModelRule](render.View{
		Cols: []render.Col{
			render.C("PROVIDER", (*guardv1.ModelRule).GetProvider),
			render.C("MODEL", (*guardv1.ModelRule).GetModel),
			render.C("EFFECT", func(r *guardv1.ModelRule) string { return enumword.String(r.GetEffect()) }),
		},
		ID: render.IDOf(func(r *guardv1.ModelRule) string { return r.GetProvider() + "/" + r.GetModel() }),
	}),
	render.For[*guardv1.ModelPolicy](render.View{
		Cols: []render.Col{
			render.CX("GROUP", func(p *guardv1.ModelPolicy, e render.Env) string { return e.Group(p.GetGroup()) }),
			render.C("PROVIDERS", func(p *guardv1.ModelPolicy) string { return render.OrDash(strings.Join(p.GetProviders(), ", ")) }),
			render.C("DEFAULT", func(p *guardv1.ModelPolicy) string {
				if p.GetDefaultEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
					return "allow (not set)"
				}
				return enumword.String(p.GetDefaultEffect())
			}),
			render.C("RULES", func(p *guardv1.ModelPolicy) string {
				var out []string
				for _, r := range p.GetRules() {
					out = append(out, r.GetProvider()+"/"+r.GetModel()+"="+enumword.String(r.GetEffect()))
				}
				return render.OrDash(strings.Join(out, " "))
			}),
			render.C("BUDGET", func(p *guardv1.ModelPolicy) string { return budgetLine(p.GetBudget()) }),
		},
		ID: render.IDOf((*guardv1.ModelPolicy).GetGroup),
	}),
}

// A group's model settings in the document, under the group: its
// providers, rules, default and budget, set after the providers and the
// groups exist.

var groupModelsState = &statePart{read: readGroupModels, plan: planGroupModels, check: checkGroupModels, sort: sortGroupModels}

// groupModelsSpec is a group's model settings (nil: none at all).
type groupModelsSpec struct {
	Providers []string         `yaml:"providers,omitempty"`
	Default   string           `yaml:"default,omitempty"`
	Rules     []modelRuleSpec  `yaml:"rules,omitempty"`
	Budget    *modelBudgetSpec `yaml:"budget,omitempty"`
}

type modelRuleSpec struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	Effect   string `yaml:"effect"`
}

func (r modelRuleSpec) key() string { return r.Provider + "/" + r.Model }

// readGroupModels reads each group's model settings.
func readGroupModels(ctx context.Context, c *clients, s *state, book groupBook) error {
	for i := range s.Groups {
		g := &s.Groups[i]
		resp, err := c.reg.GetModelPolicy(ctx, &guardv1.GetModelPolicyRequest{Group: book.id[g.Name]})
		if err != nil {
			return fmt.Errorf("read the model settings of %s: %w", g.Name, err)
		}
		g.Models = modelsSpec(resp.GetPolicy())
	}
	return nil
}

// modelsSpec is a group's policy as the document holds it.
func modelsSpec(p *guardv1.ModelPolicy) *groupModelsSpec {
	m := &groupModelsSpec{Providers: slices.Clone(p.GetProviders()), Default: enumword.String(p.GetDefaultEffect())}
	for _, r := range p.GetRules() {
		m.Rules = append(m.Rules, modelRuleSpec{Provider: r.GetProvider(), Model: r.GetModel(), Effect: enumword.String(r.GetEffect())})
	}
	if b := p.GetBudget(); b != nil {
		m.Budget = &modelBudgetSpec{Period: enumword.String(b.GetPeriod()), Tokens: b.GetTokens(), CostMicros: b.GetCostMicros(),
			OnExceed: enumword.String(b.GetOnExceed())}
	}
	if len(m.Providers) == 0 && m.Default == "" && len(m.Rules) == 0 && m.Budget == nil {
		return nil
	}
	return m
}

// orNoModels reads a nil setting as "none".
func orNoModels(m *groupModelsSpec) groupModelsSpec {
	if m == nil {
		return groupModelsSpec{}
	}
	return *m
}

// planGroupModels lists each group's model changes.
func planGroupModels(cur, want *state) (p planned) {
	for _, g := range want.Groups {
		var old groupModelsSpec
		if i := slices.IndexFunc(cur.Groups, func(o groupSpec) bool { return o.Name == g.Name }); i >= 0 {
			old = orNoModels(cur.Groups[i].Models)
		}
		p.planGroupModels(g.Name, old, orNoModels(g.Models))
	}
	return p
}

// planGroupModels lists one group's changes: its providers, default and
// budget as values, its rules one by one.
func (p *planned) planGroupModels(group string, old, want groupModelsSpec) {
	if !slices.Equal(old.Providers, want.Providers) {
		p.changes = append(p.changes, change{'~', fmt.Sprintf("model providers of group %s: %s → %s", group, orNone(old.Providers), orNone(want.Providers)),
			func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: idOr(book, group), Providers: want.Providers})
				return err
			}})
	}
	if old.Default != want.Default {
		p.changes = append(p.changes, change{'~', fmt.Sprintf("model default of group %s: %s → %s", group, orAllow(old.Default), orAllow(want.Default)),
			func(ctx context.Context, c *clients, book groupBook) error {
				e, err := enumword.Parse[guardv1.Effect](want.Default)
				if err != nil {
					return fmt.Errorf("group %s: models.default: %w", group, err)
				}
				_, err = c.reg.SetModelDefault(ctx, &guardv1.SetModelDefaultRequest{Group: idOr(book, group), Effect: e})
				return err
			}})
	}
	for _, r := range want.Rules {
		i := slices.IndexFunc(old.Rules, func(o modelRuleSpec) bool { return o.key() == r.key() })
		if i >= 0 && old.Rules[i] == r {
			continue
		}
		op, was := byte('+'), ""
		if i >= 0 {
			op, was = '~', old.Rules[i].Effect+" → "
		}
		p.changes = append(p.changes, change{op, fmt.Sprintf("model rule %s of group %s: %s%s", r.key(), group, was, r.Effect),
			func(ctx context.Context, c *clients, book groupBook) error {
				e, err := enumword.Parse[guardv1.Effect](r.Effect)
				if err != nil {
					return fmt.Errorf("group %s: model rule %s: %w", group, r.key(), err)
				}
				_, err = c.reg.SetModelRule(ctx, &guardv1.SetModelRuleRequest{Group: idOr(book, group), Provider: r.Provider, Model: r.Model, Effect: e})
				return err
			}})
	}
	for _, o := range old.Rules {
		if !slices.ContainsFunc(want.Rules, func(r modelRuleSpec) bool { return r.key() == o.key() }) {
			p.dels = append(p.dels, change{'-', fmt.Sprintf("model rule %s of group %s (%s)", o.key(), group, o.Effect),
				func(ctx context.Context, c *clients, book groupBook) error {
					_, err := c.reg.UnsetModelRule(ctx, &guardv1.UnsetModelRuleRequest{Group: idOr(book, group), Provider: o.Provider, Model: o.Model})
					return err
				}})
		}
	}
	switch {
	case want.Budget != nil && (old.Budget == nil || *old.Budget != *want.Budget):
		p.changes = append(p.changes, change{'~', fmt.Sprintf("model budget of group %s: %s → %s", group, budgetWords(old.Budget), budgetWords(want.Budget)),
			setBudget(group, want.Budget)})
	case want.Budget == nil && old.Budget != nil:
		p.dels = append(p.dels, change{'-', fmt.Sprintf("model budget of group %s (%s)", group, budgetWords(old.Budget)), setBudget(group, nil)})
	}
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

func orAllow(effect string) string {
	if effect == "" {
		return "allow (not set)"
	}
	return effect
}

// checkGroupModels refuses a group's rule listed twice.
func checkGroupModels(s *state, _ func(kind, key string) error) error {
	dup := duplicates()
	var err error
	for _, g := range s.Groups {
		for _, r := range orNoModels(g.Models).Rules {
			err = firstErr(err, dup("model rule of group "+g.Name, r.key()))
		}
	}
	return err
}

func sortGroupModels(s *state) {
	for _, g := range s.Groups {
		if g.Models != nil {
			slices.Sort(g.Models.Providers)
			slices.SortFunc(g.Models.Rules, func(a, b modelRuleSpec) int { return strings.Compare(a.key(), b.key()) })
		}
	}
}
