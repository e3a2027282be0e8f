package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
)

// modelPlan is what apply changes of the model gateway, by when it runs:
// providers and prices before the groups (which name providers), the
// groups' settings after them; deletions of groups' settings among the
// others, and of providers and prices after every other deletion (a group
// deleted or changed lets its provider go).
type modelPlan struct {
	providers, groups []change
	dels, lastDels    []change
}

func planModels(cur, want *state) modelPlan {
	var p modelPlan
	for _, w := range want.ModelProviders {
		i := slices.IndexFunc(cur.ModelProviders, func(o modelProviderSpec) bool { return o.Name == w.Name })
		if i >= 0 && cur.ModelProviders[i] == w && (w.Credential == secret.Redacted || w.Credential == "") {
			continue // the same: its credential kept, or none
		}
		op, what := byte('+'), fmt.Sprintf("model provider %s: %s at %s", w.Name, w.Kind, w.BaseURL)
		if i >= 0 {
			op = '~'
		}
		switch {
		case w.Credential == "" && i >= 0 && cur.ModelProviders[i].Credential != "":
			what += " (its credential removed)"
		case w.Credential != "" && w.Credential != secret.Redacted:
			what += " (credential set from the document)"
		}
		p.providers = append(p.providers, change{op, what, setProvider(w)})
	}
	for _, o := range cur.ModelProviders {
		if !slices.ContainsFunc(want.ModelProviders, func(w modelProviderSpec) bool { return w.Name == o.Name }) {
			p.lastDels = append(p.lastDels, change{'-', "model provider " + o.Name, func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.DeleteModelProvider(ctx, &guardv1.DeleteModelProviderRequest{Name: o.Name})
				return err
			}})
		}
	}
	for _, w := range want.ModelPrices {
		i := slices.IndexFunc(cur.ModelPrices, func(o modelPriceSpec) bool { return o.key() == w.key() })
		if i >= 0 && cur.ModelPrices[i] == w {
			continue
		}
		op := byte('+')
		if i >= 0 {
			op = '~'
		}
		p.providers = append(p.providers, change{op, fmt.Sprintf("model price %s: %d in, %d out, %d cache read, %d cache write (micro-units per million tokens)",
			w.key(), w.InputMicros, w.OutputMicros, w.CacheReadMicros, w.CacheWriteMicros), setPrice(w, false)})
	}
	for _, o := range cur.ModelPrices {
		if !slices.ContainsFunc(want.ModelPrices, func(w modelPriceSpec) bool { return w.key() == o.key() }) {
			p.lastDels = append(p.lastDels, change{'-', "model price " + o.key(), setPrice(o, true)})
		}
	}
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
func (p *modelPlan) planGroupModels(group string, old, want groupModelsSpec) {
	if !slices.Equal(old.Providers, want.Providers) {
		p.groups = append(p.groups, change{'~', fmt.Sprintf("model providers of group %s: %s → %s", group, orNone(old.Providers), orNone(want.Providers)),
			func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: idOr(book, group), Providers: want.Providers})
				return err
			}})
	}
	if old.Default != want.Default {
		p.groups = append(p.groups, change{'~', fmt.Sprintf("model default of group %s: %s → %s", group, orAllow(old.Default), orAllow(want.Default)),
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
		p.groups = append(p.groups, change{op, fmt.Sprintf("model rule %s of group %s: %s%s", r.key(), group, was, r.Effect),
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
		p.groups = append(p.groups, change{'~', fmt.Sprintf("model budget of group %s: %s → %s", group, budgetWords(old.Budget), budgetWords(want.Budget)),
			setBudget(group, want.Budget)})
	case want.Budget == nil && old.Budget != nil:
		p.dels = append(p.dels, change{'-', fmt.Sprintf("model budget of group %s (%s)", group, budgetWords(old.Budget)), setBudget(group, nil)})
	}
}

func setProvider(w modelProviderSpec) func(ctx context.Context, c *clients, _ groupBook) error {
	return func(ctx context.Context, c *clients, _ groupBook) error {
		kind, err := enumword.Parse[guardv1.ModelProviderKind](w.Kind)
		if err != nil {
			return fmt.Errorf("model provider %s: kind: %w", w.Name, err)
		}
		req := &guardv1.SetModelProviderRequest{Name: w.Name, Kind: kind, BaseUrl: w.BaseURL}
		if w.Credential != secret.Redacted {
			cred := w.Credential // "" removes it
			req.Credential = &cred
		}
		_, err = c.reg.SetModelProvider(ctx, req)
		return err
	}
}

func setPrice(w modelPriceSpec, remove bool) func(ctx context.Context, c *clients, _ groupBook) error {
	return func(ctx context.Context, c *clients, _ groupBook) error {
		_, err := c.reg.SetModelPrice(ctx, &guardv1.SetModelPriceRequest{Remove: remove, Price: &guardv1.ModelPrice{Provider: w.Provider, Model: w.Model,
			InputMicros: w.InputMicros, OutputMicros: w.OutputMicros, CacheReadMicros: w.CacheReadMicros, CacheWriteMicros: w.CacheWriteMicros}})
		return err
	}
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
