// Package modelrule is the one rule for an agent's model call, shared by the
// runner's model gateway that forwards it, the server that decides and
// meters it and ncl that sets the rules: what a provider and a model name
// may be, which rule answers a call, which price a model has, and what a
// call costs.
//
// A rule names a provider and a model exactly ("claude-sonnet-4-5") or by a
// prefix ending in * ("claude-*", or "*": every model of the provider). Of
// the rules that match a call the most restrictive answers (deny, then
// hold, then allow), as egress rules do; a model no rule matches gets the
// group's default, allow when none is set (the group was given the
// provider on purpose).
package modelrule

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// The names of a model call and of a call past the budget in the guard's
// catalog.
const (
	CallAction   = "model.call"   // what the guard decides for every call
	CallKind     = "model_call"   // the hold kind of its grants
	BudgetAction = "model.budget" // a call past the group's budget
	BudgetKind   = "model_budget" // the hold kind of its grants
)

// Resource and payload keys. model.call: {provider, model}, the payload
// adds the route's kind; model.budget: {budget} (the period, "day" or
// "month": stable, so an approval for N hours matches every later call).
const (
	KeyProvider = "provider"
	KeyModel    = "model"
	KeyKind     = "kind"
	KeyBudget   = "budget"
)

// Provider kinds: the wire protocol a provider speaks.
const (
	KindAnthropic = "anthropic" // /v1/messages
	KindOpenAI    = "openai"    // /v1/chat/completions, /v1/responses
)

// Effects a rule or a group's default sets.
const (
	EffectAllow = "allow"
	EffectHold  = "hold"
	EffectDeny  = "deny"
)

// Budget periods (UTC).
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// MaxRules bounds a group's rules: they are read whole on every decision.
const MaxRules = 256

// MaxModelLen bounds a model name or pattern.
const MaxModelLen = 256

var providerRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// CheckProvider refuses a provider name that is not 1..63 lower-case
// letters, digits, '-' and '_' (starting with a letter or digit).
func CheckProvider(name string) error {
	if !providerRe.MatchString(name) {
		return fmt.Errorf("provider name %q: 1 to 63 lower-case letters, digits, '-' and '_', starting with a letter or digit", name)
	}
	return nil
}

// CheckKind refuses a kind that is not anthropic or openai.
func CheckKind(kind string) error {
	if kind != KindAnthropic && kind != KindOpenAI {
		return fmt.Errorf("provider kind %q is not anthropic or openai", kind)
	}
	return nil
}

// ErrModel is wrapped by every refusal of a model name or pattern.
var ErrModel = errors.New("not a model name")

// CheckModel refuses a model name a call may not carry: empty, longer than
// MaxModelLen, not UTF-8, or holding a space, a control character or '*'.
func CheckModel(m string) error {
	if err := checkText(m); err != nil {
		return err
	}
	if strings.Contains(m, "*") {
		return fmt.Errorf("%w: %q holds '*'", ErrModel, m)
	}
	return nil
}

// CheckPattern refuses a rule's or a price's model pattern: a model name,
// or a prefix of one followed by a single trailing '*' ("*" alone: every
// model).
func CheckPattern(p string) error {
	if err := checkText(p); err != nil {
		return err
	}
	if i := strings.IndexByte(p, '*'); i >= 0 && i != len(p)-1 {
		return fmt.Errorf("%w: %q: '*' is only allowed last (a prefix)", ErrModel, p)
	}
	return nil
}

func checkText(m string) error {
	if m == "" || len(m) > MaxModelLen {
		return fmt.Errorf("%w: %q: 1 to %d bytes", ErrModel, truncate(m), MaxModelLen)
	}
	if !utf8.ValidString(m) {
		return fmt.Errorf("%w: not UTF-8", ErrModel)
	}
	for _, r := range m {
		if r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return fmt.Errorf("%w: %q holds a space or a control character", ErrModel, truncate(m))
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// matches reports whether a pattern covers a model.
func matches(pattern, model string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(model, prefix)
	}
	return pattern == model
}

// Rule is one of a group's model rules.
type Rule struct {
	Provider string `json:"provider"`
	Model    string `json:"model"` // exact, or a prefix ending in *
	Effect   string `json:"effect"`
}

// Matches reports whether the rule covers a call of provider's model.
func (r Rule) Matches(provider, model string) bool {
	return r.Provider == provider && matches(r.Model, model)
}

// Describe is a rule as a person reads it: "anthropic/claude-*".
func (r Rule) Describe() string { return r.Provider + "/" + r.Model }

// Answer is which effect a call gets, and from what.
type Answer struct {
	Effect string
	// Rule is the rule that answered; nil when a default did.
	Rule *Rule
	// Default reports a default the operator set (false: the built-in allow).
	Default bool
}

func restrictiveness(effect string) int {
	switch effect {
	case EffectAllow:
		return 1
	case EffectHold:
		return 2
	}
	return 3 // deny, and anything unknown (fail closed)
}

// Decide is the one rule: of the rules that match the call the most
// restrictive answers; none → the default ("" → allow). An effect that is
// not one of the three is a deny.
func Decide(rules []Rule, def, provider, model string) Answer {
	var best *Rule
	for i := range rules {
		r := &rules[i]
		if r.Matches(provider, model) && (best == nil || restrictiveness(r.Effect) > restrictiveness(best.Effect)) {
			best = r
		}
	}
	if best != nil {
		return Answer{Effect: known(best.Effect), Rule: best}
	}
	if def == "" {
		return Answer{Effect: EffectAllow}
	}
	return Answer{Effect: known(def), Default: true}
}

func known(effect string) string {
	switch effect {
	case EffectAllow, EffectHold:
		return effect
	}
	return EffectDeny
}

// CheckEffect refuses an effect that is not allow, hold or deny.
func CheckEffect(effect string) error {
	switch effect {
	case EffectAllow, EffectHold, EffectDeny:
		return nil
	}
	return fmt.Errorf("effect %q is not allow, hold or deny", effect)
}

// CheckPeriod refuses a budget period that is not day or month.
func CheckPeriod(p string) error {
	if p != PeriodDay && p != PeriodMonth {
		return fmt.Errorf("budget period %q is not day or month", p)
	}
	return nil
}

// PeriodStart is the UTC day a period that holds t began on.
func PeriodStart(period string, t time.Time) time.Time {
	t = t.UTC()
	if period == PeriodMonth {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// Tokens are a call's tokens by kind, as the provider reports them (input
// without the cached parts: OpenAI's prompt_tokens less its cached_tokens).
type Tokens struct {
	Input, Output, CacheRead, CacheWrite int64
}

// Total is every token of the call, as a budget counts them.
func (t Tokens) Total() int64 {
	return satAdd(satAdd(t.Input, t.Output), satAdd(t.CacheRead, t.CacheWrite))
}

// Price is what a million tokens of a provider's model cost, in
// micro-units of the operator's currency (Model may end in *).
type Price struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Input      int64  `json:"input_micros"`
	Output     int64  `json:"output_micros"`
	CacheRead  int64  `json:"cache_read_micros"`
	CacheWrite int64  `json:"cache_write_micros"`
}

// PriceFor is the price of provider's model: an exact entry, else the
// longest prefix; ok false when none matches (the call costs nothing).
func PriceFor(prices []Price, provider, model string) (Price, bool) {
	best, found := Price{}, false
	for _, p := range prices {
		if p.Provider != provider || !matches(p.Model, model) {
			continue
		}
		if p.Model == model {
			return p, true
		}
		if !found || len(p.Model) > len(best.Model) {
			best, found = p, true
		}
	}
	return best, found
}

// Cost is what t costs at p, in micro-units, rounded up (saturating: no
// count an agent can provoke wraps around).
func (p Price) Cost(t Tokens) int64 {
	var sum int64
	for _, part := range [4][2]int64{{t.Input, p.Input}, {t.Output, p.Output}, {t.CacheRead, p.CacheRead}, {t.CacheWrite, p.CacheWrite}} {
		sum = satAdd(sum, perMillion(part[0], part[1]))
	}
	return sum
}

// WorstCost is the most a call of at most input and output tokens can
// cost at p: every input token at the dearest of the input prices (the
// provider decides what it caches).
func (p Price) WorstCost(input, output int64) int64 {
	dearest := max(p.Input, p.CacheRead, p.CacheWrite)
	return satAdd(perMillion(input, dearest), perMillion(output, p.Output))
}

// perMillion is ceil(tokens × micros / 1e6), saturating at MaxInt64.
func perMillion(tokens, micros int64) int64 {
	if tokens <= 0 || micros <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(micros))
	lo, carry := bits.Add64(lo, 999_999, 0)
	hi += carry
	if hi >= 1_000_000 {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func satAdd(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
