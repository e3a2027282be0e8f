package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/metering"
	"github.com/clawguard/clawguard/server/internal/store"
)

// A group's model settings (migration 0430): the providers its agents may
// use, its model rules and default (the facts of model.call), and its
// budget, whose over-budget setting is the fact of model.budget. They
// change under the group's config lock and do not bump its version: no
// container changes, the next call is decided on them.

// modelPolicy is the stored policy of a group.
type modelPolicy struct {
	Providers  []string
	Rules      []modelrule.Rule
	Default    string // "" = allow
	OverBudget string // "" = no budget
}

func readModelsTx(ctx context.Context, q store.Querier, group string, lock bool) (modelPolicy, error) {
	var (
		p   modelPolicy
		raw []byte
	)
	sql := `SELECT model_providers, model_rules, model_default, model_over_budget FROM container_configs WHERE agent_group_id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	err := q.QueryRow(ctx, sql, group).Scan(&p.Providers, &raw, &p.Default, &p.OverBudget)
	if store.IsNoRows(err) {
		return modelPolicy{}, nil
	}
	if err != nil {
		return p, fmt.Errorf("read the model settings of %s: %w", group, err)
	}
	if err := json.Unmarshal(raw, &p.Rules); err != nil {
		return p, fmt.Errorf("decode the model rules of %s: %w", group, err)
	}
	return p, nil
}

func (p modelPolicy) proto(ctx context.Context, q store.Querier, group string) (*guardv1.ModelPolicy, error) {
	out := &guardv1.ModelPolicy{Group: group, Providers: p.Providers}
	var err error
	if out.DefaultEffect, err = enumFromColumn[guardv1.Effect]("model_default", p.Default); err != nil {
		return nil, err
	}
	for _, r := range p.Rules {
		e, err := enumFromColumn[guardv1.Effect]("model_rules.effect", r.Effect)
		if err != nil {
			return nil, err
		}
		out.Rules = append(out.Rules, &guardv1.ModelRule{Provider: r.Provider, Model: r.Model, Effect: e})
	}
	out.Budget, err = metering.BudgetState(ctx, q, group)
	return out, err
}

// GetModelPolicy reads a group's providers, rules, default and budget (with
// what it spent and has reserved in the budget's current period).
func (s *Service) GetModelPolicy(ctx context.Context, req *guardv1.GetModelPolicyRequest) (_ *guardv1.GetModelPolicyResponse, err error) {
	defer store.Faulted(&err, "model policy")
	// The group read answers NotFound for a group the caller may not see.
	if _, err := s.GetGroup(ctx, &guardv1.GetGroupRequest{Id: req.GetGroup()}); err != nil {
		return nil, err
	}
	p, err := readModelsTx(ctx, s.pool, req.GetGroup(), false)
	if err != nil {
		return nil, err
	}
	out, err := p.proto(ctx, s.pool, req.GetGroup())
	if err != nil {
		return nil, err
	}
	return &guardv1.GetModelPolicyResponse{Policy: out}, nil
}

// SetModelProviders sets the providers a group's agents may use: each one
// that exists, at most one of each kind (a route's kind picks it).
func (s *Service) SetModelProviders(ctx context.Context, req *guardv1.SetModelProvidersRequest) (_ *guardv1.SetModelProvidersResponse, err error) {
	defer store.Faulted(&err, "model providers")
	names, err := checkSetModelProviders(req)
	if err != nil {
		return nil, err
	}
	p, err := s.changeModels(ctx, req.GetGroup(), func(tx pgx.Tx, p *modelPolicy) error {
		// Locked: a provider being deleted is either gone or stays.
		rows, err := tx.Query(ctx, `SELECT name, kind FROM model_providers WHERE name = ANY ($1) FOR SHARE`, names)
		if err != nil {
			return err
		}
		kinds := map[string]string{}
		var name, kind string
		if _, err := pgx.ForEachRow(rows, []any{&name, &kind}, func() error { kinds[name] = kind; return nil }); err != nil {
			return err
		}
		byKind := map[string]string{}
		for _, n := range names {
			k, ok := kinds[n]
			if !ok {
				return notFound("provider %q not found (ncl models providers list)", n)
			}
			if other, dup := byKind[k]; dup {
				return invalid("providers", "%s and %s are both %s providers: a group is given at most one of each kind (a call's route picks it)", other, n, k)
			}
			byKind[k] = n
		}
		p.Providers = names
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetModelProvidersResponse{Policy: p}, nil
}

// SetModelRule sets the effect of a provider's model (pattern), replacing
// the rule of the same provider and model.
func (s *Service) SetModelRule(ctx context.Context, req *guardv1.SetModelRuleRequest) (_ *guardv1.SetModelRuleResponse, err error) {
	defer store.Faulted(&err, "model rule")
	rule, err := checkSetModelRule(req)
	if err != nil {
		return nil, err
	}
	p, err := s.changeModels(ctx, req.GetGroup(), func(_ pgx.Tx, p *modelPolicy) error {
		p.Rules = slices.DeleteFunc(p.Rules, func(r modelrule.Rule) bool { return r.Provider == rule.Provider && r.Model == rule.Model })
		if len(p.Rules) >= modelrule.MaxRules {
			return invalid("model", "group %q has %d model rules, the most a group may have (remove some, or set its default)", req.GetGroup(), len(p.Rules))
		}
		p.Rules = append(p.Rules, rule)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetModelRuleResponse{Policy: p}, nil
}

// UnsetModelRule removes the rule of a provider's model (pattern).
func (s *Service) UnsetModelRule(ctx context.Context, req *guardv1.UnsetModelRuleRequest) (_ *guardv1.UnsetModelRuleResponse, err error) {
	defer store.Faulted(&err, "model rule")
	if err := checkModelTarget(req.GetGroup(), req.GetProvider(), req.GetModel()); err != nil {
		return nil, err
	}
	p, err := s.changeModels(ctx, req.GetGroup(), func(_ pgx.Tx, p *modelPolicy) error {
		n := len(p.Rules)
		p.Rules = slices.DeleteFunc(p.Rules, func(r modelrule.Rule) bool { return r.Provider == req.GetProvider() && r.Model == req.GetModel() })
		if len(p.Rules) == n {
			return notFound("group %q has no model rule for %s/%s (ncl models list --group %s)", req.GetGroup(), req.GetProvider(), req.GetModel(), req.GetGroup())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.UnsetModelRuleResponse{Policy: p}, nil
}

// SetModelDefault sets (or, unspecified, removes) what a model no rule
// names gets.
func (s *Service) SetModelDefault(ctx context.Context, req *guardv1.SetModelDefaultRequest) (_ *guardv1.SetModelDefaultResponse, err error) {
	defer store.Faulted(&err, "model default")
	def, err := checkSetModelDefault(req)
	if err != nil {
		return nil, err
	}
	p, err := s.changeModels(ctx, req.GetGroup(), func(_ pgx.Tx, p *modelPolicy) error {
		p.Default = def
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetModelDefaultResponse{Policy: p}, nil
}

// changeModels applies change to a group's model settings under its config
// lock and writes them back, rules sorted by provider and model.
func (s *Service) changeModels(ctx context.Context, group string, change func(pgx.Tx, *modelPolicy) error) (*guardv1.ModelPolicy, error) {
	var out *guardv1.ModelPolicy
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := LockConfigTx(ctx, tx, group); err != nil {
			return err
		}
		p, err := readModelsTx(ctx, tx, group, true)
		if err != nil {
			return err
		}
		if err := change(tx, &p); err != nil {
			return err
		}
		if err := writeModelsTx(ctx, tx, group, p); err != nil {
			return err
		}
		out, err = p.proto(ctx, tx, group)
		return err
	})
	return out, err
}

func writeModelsTx(ctx context.Context, tx pgx.Tx, group string, p modelPolicy) error {
	slices.SortFunc(p.Rules, func(a, b modelrule.Rule) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	if p.Rules == nil {
		p.Rules = []modelrule.Rule{}
	}
	raw, err := json.Marshal(p.Rules)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE container_configs SET model_providers = $2, model_rules = $3, model_default = $4,
		model_over_budget = $5, updated_at = now() WHERE agent_group_id = $1`, group, orEmpty(p.Providers), raw, p.Default, p.OverBudget); err != nil {
		return fmt.Errorf("write the model settings of %s: %w", group, err)
	}
	return nil
}

func checkSetModelProviders(r *guardv1.SetModelProvidersRequest) ([]string, error) {
	if err := required("group", r.GetGroup()); err != nil {
		return nil, err
	}
	var names []string
	for _, n := range r.GetProviders() {
		if err := modelrule.CheckProvider(n); err != nil {
			return nil, invalid("providers", "%v", err)
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

func checkModelTarget(group, provider, model string) error {
	if err := required("group", group); err != nil {
		return err
	}
	if err := modelrule.CheckProvider(provider); err != nil {
		return invalid("provider", "%v", err)
	}
	if err := modelrule.CheckPattern(model); err != nil {
		return invalid("model", "%v", err)
	}
	return nil
}

func checkSetModelRule(r *guardv1.SetModelRuleRequest) (modelrule.Rule, error) {
	if err := checkModelTarget(r.GetGroup(), r.GetProvider(), r.GetModel()); err != nil {
		return modelrule.Rule{}, err
	}
	if r.GetEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
		return modelrule.Rule{}, invalid("effect", "required: allow, hold or deny (ncl models unset removes a rule)")
	}
	e, err := enumColumn("effect", r.GetEffect())
	if err != nil {
		return modelrule.Rule{}, err
	}
	return modelrule.Rule{Provider: r.GetProvider(), Model: r.GetModel(), Effect: e}, nil
}

func checkSetModelDefault(r *guardv1.SetModelDefaultRequest) (string, error) {
	if err := required("group", r.GetGroup()); err != nil {
		return "", err
	}
	return enumColumn("effect", r.GetEffect())
}
