package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The model gateway: providers (never a credential: whether one is set and
// when), a group's model settings, budget, prices and usage.
func init() {
	register[*guardv1.ModelProvider](view{
		cols: []col{
			c("NAME", (*guardv1.ModelProvider).GetName),
			c("KIND", func(p *guardv1.ModelProvider) string { return enumword.String(p.GetKind()) }),
			c("BASE URL", (*guardv1.ModelProvider).GetBaseUrl),
			c("CREDENTIAL", func(p *guardv1.ModelProvider) string {
				if !p.GetHasCredential() {
					return "none"
				}
				if t := p.GetCredentialSetAt(); t != nil {
					return "set " + t.AsTime().UTC().Format("2006-01-02 15:04 UTC")
				}
				return "set"
			}),
		},
		id: idOf((*guardv1.ModelProvider).GetName),
	})
	register[*guardv1.ModelRule](view{
		cols: []col{
			c("PROVIDER", (*guardv1.ModelRule).GetProvider),
			c("MODEL", (*guardv1.ModelRule).GetModel),
			c("EFFECT", func(r *guardv1.ModelRule) string { return enumword.String(r.GetEffect()) }),
		},
		id: idOf(func(r *guardv1.ModelRule) string { return r.GetProvider() + "/" + r.GetModel() }),
	})
	register[*guardv1.ModelPolicy](view{
		cols: []col{
			cx("GROUP", func(p *guardv1.ModelPolicy, e env) string { return e.group(p.GetGroup()) }),
			c("PROVIDERS", func(p *guardv1.ModelPolicy) string { return orDash(strings.Join(p.GetProviders(), ", ")) }),
			c("DEFAULT", func(p *guardv1.ModelPolicy) string {
				if p.GetDefaultEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
					return "allow (not set)"
				}
				return enumword.String(p.GetDefaultEffect())
			}),
			c("RULES", func(p *guardv1.ModelPolicy) string {
				var out []string
				for _, r := range p.GetRules() {
					out = append(out, r.GetProvider()+"/"+r.GetModel()+"="+enumword.String(r.GetEffect()))
				}
				return orDash(strings.Join(out, " "))
			}),
			c("BUDGET", func(p *guardv1.ModelPolicy) string { return budgetLine(p.GetBudget()) }),
		},
		id: idOf((*guardv1.ModelPolicy).GetGroup),
	})
	register[*guardv1.ModelBudget](view{
		cols: []col{
			c("PERIOD", func(b *guardv1.ModelBudget) string { return enumword.String(b.GetPeriod()) }),
			c("SINCE", func(b *guardv1.ModelBudget) string {
				return b.GetPeriodStart().AsTime().UTC().Format("2006-01-02") + " (UTC)"
			}),
			c("TOKENS", func(b *guardv1.ModelBudget) string {
				return spentOf(strconv.FormatInt(b.GetSpentTokens(), 10), strconv.FormatInt(b.GetReservedTokens(), 10), b.GetTokens(), strconv.FormatInt(b.GetTokens(), 10))
			}),
			c("COST", func(b *guardv1.ModelBudget) string {
				return spentOf(Micros(b.GetSpentCostMicros()), Micros(b.GetReservedCostMicros()), b.GetCostMicros(), Micros(b.GetCostMicros()))
			}),
			c("PAST IT", func(b *guardv1.ModelBudget) string { return enumword.String(b.GetOnExceed()) }),
		},
		id: idOf(func(b *guardv1.ModelBudget) string { return enumword.String(b.GetPeriod()) }),
	})
	register[*guardv1.ModelPrice](view{
		cols: []col{
			c("PROVIDER", (*guardv1.ModelPrice).GetProvider),
			c("MODEL", (*guardv1.ModelPrice).GetModel),
			c("INPUT/M", func(p *guardv1.ModelPrice) string { return Micros(p.GetInputMicros()) }),
			c("OUTPUT/M", func(p *guardv1.ModelPrice) string { return Micros(p.GetOutputMicros()) }),
			c("CACHE READ/M", func(p *guardv1.ModelPrice) string { return Micros(p.GetCacheReadMicros()) }),
			c("CACHE WRITE/M", func(p *guardv1.ModelPrice) string { return Micros(p.GetCacheWriteMicros()) }),
		},
		id: idOf(func(p *guardv1.ModelPrice) string { return p.GetProvider() + "/" + p.GetModel() }),
	})
	register[*guardv1.ModelUsage](view{
		cols: []col{
			c("DAY", (*guardv1.ModelUsage).GetDay),
			cx("GROUP", func(u *guardv1.ModelUsage, e env) string { return e.group(u.GetGroup()) }),
			c("PROVIDER", (*guardv1.ModelUsage).GetProvider),
			c("MODEL", (*guardv1.ModelUsage).GetModel),
			c("CALLS", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetCalls(), 10) }),
			c("INPUT", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetInputTokens(), 10) }),
			c("OUTPUT", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetOutputTokens(), 10) }),
			c("CACHE READ", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetCacheReadTokens(), 10) }),
			c("CACHE WRITE", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetCacheWriteTokens(), 10) }),
			c("COST", func(u *guardv1.ModelUsage) string { return Micros(u.GetCostMicros()) }),
			wide(c("GROUP ID", (*guardv1.ModelUsage).GetGroup)),
		},
		id: idOf(func(u *guardv1.ModelUsage) string {
			return u.GetDay() + "/" + u.GetGroup() + "/" + u.GetProvider() + "/" + u.GetModel()
		}),
	})
}

// Micros is an amount of micro-units as a person reads it ("3.75", "0").
func Micros(m int64) string {
	s := strings.TrimRight(fmt.Sprintf("%d.%06d", m/1_000_000, m%1_000_000), "0")
	return strings.TrimSuffix(s, ".")
}

func spentOf(spent, reserved string, limit int64, limitText string) string {
	if limit == 0 {
		return spent + " spent (no limit)"
	}
	return fmt.Sprintf("%s of %s spent, %s reserved", spent, limitText, reserved)
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
		parts = append(parts, fmt.Sprintf("%s/%s", Micros(b.GetSpentCostMicros()), Micros(b.GetCostMicros())))
	}
	return fmt.Sprintf("%s a %s, past it %s", strings.Join(parts, " and "), enumword.String(b.GetPeriod()), enumword.String(b.GetOnExceed()))
}
