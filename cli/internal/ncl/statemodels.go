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

// The model gateway in the document: the operator's providers (their
// credentials write-only: export writes "<redacted>", which apply reads as
// "keep the one the server holds"; a value written out is set; none means
// none) and prices, and each group's model settings under the group.

type modelProviderSpec struct {
	Name       string `yaml:"name"`
	Kind       string `yaml:"kind"`
	BaseURL    string `yaml:"baseUrl"`
	Credential string `yaml:"credential,omitempty"`
}

type modelPriceSpec struct {
	Provider         string `yaml:"provider"`
	Model            string `yaml:"model"`
	InputMicros      int64  `yaml:"inputMicros,omitempty"`
	OutputMicros     int64  `yaml:"outputMicros,omitempty"`
	CacheReadMicros  int64  `yaml:"cacheReadMicros,omitempty"`
	CacheWriteMicros int64  `yaml:"cacheWriteMicros,omitempty"`
}

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

type modelBudgetSpec struct {
	Period     string `yaml:"period"`
	Tokens     int64  `yaml:"tokens,omitempty"`
	CostMicros int64  `yaml:"costMicros,omitempty"`
	OnExceed   string `yaml:"onExceed"`
}

func (p modelPriceSpec) key() string { return p.Provider + "/" + p.Model }
func (r modelRuleSpec) key() string  { return r.Provider + "/" + r.Model }

// readModels reads the providers, the prices and each group's settings.
func readModels(ctx context.Context, c *clients, s *state, book groupBook) error {
	ps, err := c.reg.ListModelProviders(ctx, &guardv1.ListModelProvidersRequest{})
	if err != nil {
		return fmt.Errorf("read model providers: %w", err)
	}
	for _, p := range ps.GetProviders() {
		spec := modelProviderSpec{Name: p.GetName(), Kind: enumword.String(p.GetKind()), BaseURL: p.GetBaseUrl()}
		if p.GetHasCredential() {
			spec.Credential = secret.Redacted
		}
		s.ModelProviders = append(s.ModelProviders, spec)
	}
	prices, err := c.reg.ListModelPrices(ctx, &guardv1.ListModelPricesRequest{})
	if err != nil {
		return fmt.Errorf("read model prices: %w", err)
	}
	for _, p := range prices.GetPrices() {
		s.ModelPrices = append(s.ModelPrices, modelPriceSpec{Provider: p.GetProvider(), Model: p.GetModel(), InputMicros: p.GetInputMicros(),
			OutputMicros: p.GetOutputMicros(), CacheReadMicros: p.GetCacheReadMicros(), CacheWriteMicros: p.GetCacheWriteMicros()})
	}
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

// checkModels refuses a document that lists a provider, price or rule twice.
func (s *state) checkModels() error {
	seen := map[string]bool{}
	dup := func(kind, key string) error {
		if key == "" || strings.HasSuffix(key, "/") || strings.HasPrefix(key, "/") || seen[kind+" "+key] {
			return fmt.Errorf("%s %q is empty or listed twice", kind, key)
		}
		seen[kind+" "+key] = true
		return nil
	}
	var err error
	for _, p := range s.ModelProviders {
		err = firstErr(err, dup("model provider", p.Name))
	}
	for _, p := range s.ModelPrices {
		err = firstErr(err, dup("model price", p.key()))
	}
	for _, g := range s.Groups {
		for _, r := range orNoModels(g.Models).Rules {
			err = firstErr(err, dup("model rule of group "+g.Name, r.key()))
		}
	}
	return err
}

func (s *state) sortModels() {
	slices.SortFunc(s.ModelProviders, func(a, b modelProviderSpec) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.ModelPrices, func(a, b modelPriceSpec) int { return strings.Compare(a.key(), b.key()) })
	for _, g := range s.Groups {
		if g.Models != nil {
			slices.Sort(g.Models.Providers)
			slices.SortFunc(g.Models.Rules, func(a, b modelRuleSpec) int { return strings.Compare(a.key(), b.key()) })
		}
	}
}
