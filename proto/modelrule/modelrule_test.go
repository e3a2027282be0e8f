package modelrule

import (
	"math"
	"testing"
	"time"
)

func TestDecideMostRestrictiveWins(t *testing.T) {
	rules := []Rule{
		{Provider: "anthropic", Model: "claude-*", Effect: EffectAllow},
		{Provider: "anthropic", Model: "claude-opus-*", Effect: EffectHold},
		{Provider: "anthropic", Model: "claude-opus-4-1", Effect: EffectDeny},
		{Provider: "openai", Model: "*", Effect: EffectHold},
		{Provider: "openai", Model: "gpt-5-mini", Effect: "bogus"},
	}
	cases := []struct {
		provider, model, def, want string
		rule                       string // "" = a default answered
	}{
		{"anthropic", "claude-sonnet-4-5", "", EffectAllow, "anthropic/claude-*"},
		{"anthropic", "claude-opus-4", "", EffectHold, "anthropic/claude-opus-*"},
		{"anthropic", "claude-opus-4-1", "", EffectDeny, "anthropic/claude-opus-4-1"},
		{"anthropic", "claude-opus-4-10", "", EffectHold, "anthropic/claude-opus-*"},
		{"anthropic", "other", "", EffectAllow, ""},
		{"anthropic", "other", EffectDeny, EffectDeny, ""},
		{"openai", "gpt-5", "", EffectHold, "openai/*"},
		{"openai", "gpt-5-mini", "", EffectDeny, "openai/gpt-5-mini"}, // unknown effect fails closed
		{"other", "claude-sonnet-4-5", "", EffectAllow, ""},           // rules are per provider
		{"anthropic", "other", "weird", EffectDeny, ""},
	}
	for _, c := range cases {
		a := Decide(rules, c.def, c.provider, c.model)
		got := ""
		if a.Rule != nil {
			got = a.Rule.Describe()
		}
		if a.Effect != c.want || got != c.rule || (a.Rule == nil && a.Default != (c.def != "")) {
			t.Errorf("%s/%s default %q: %s by %q (default %v), want %s by %q", c.provider, c.model, c.def, a.Effect, got, a.Default, c.want, c.rule)
		}
	}
}

func TestPatternsAndNames(t *testing.T) {
	for _, ok := range []string{"claude-sonnet-4-5", "gpt-4o-2024-08-06", "models/gemini", "a"} {
		if err := CheckModel(ok); err != nil {
			t.Errorf("CheckModel(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "has space", "tab\t", "claude-*", "x\x00", "\xff", string(make([]byte, 257))} {
		if CheckModel(bad) == nil {
			t.Errorf("CheckModel(%q) passed", bad)
		}
	}
	for _, ok := range []string{"*", "claude-*", "gpt-5"} {
		if err := CheckPattern(ok); err != nil {
			t.Errorf("CheckPattern(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"*-mini", "c*ude", "**", ""} {
		if CheckPattern(bad) == nil {
			t.Errorf("CheckPattern(%q) passed", bad)
		}
	}
	for _, bad := range []string{"", "Anthropic", "-x", "a b", string(make([]byte, 64))} {
		if CheckProvider(bad) == nil {
			t.Errorf("CheckProvider(%q) passed", bad)
		}
	}
}

func TestPricesLongestMatchAndCost(t *testing.T) {
	prices := []Price{
		{Provider: "anthropic", Model: "*", Input: 1, Output: 1},
		{Provider: "anthropic", Model: "claude-*", Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000},
		{Provider: "anthropic", Model: "claude-opus-4-1", Input: 15_000_000, Output: 75_000_000},
	}
	if p, ok := PriceFor(prices, "anthropic", "claude-opus-4-1"); !ok || p.Input != 15_000_000 {
		t.Fatalf("exact: %+v %v", p, ok)
	}
	if p, ok := PriceFor(prices, "anthropic", "claude-sonnet-4-5"); !ok || p.Model != "claude-*" {
		t.Fatalf("longest prefix: %+v %v", p, ok)
	}
	if _, ok := PriceFor(prices, "openai", "gpt-5"); ok {
		t.Fatal("a provider without prices has one")
	}
	p, _ := PriceFor(prices, "anthropic", "claude-sonnet-4-5")
	// 1000 in at $3/M = 3000 µ; 100 out at $15/M = 1500 µ; 10 cache read
	// at $0.30/M = 3 µ; 1 cache write at $3.75/M = 3.75 → 4 µ (rounded up).
	if got := p.Cost(Tokens{Input: 1000, Output: 100, CacheRead: 10, CacheWrite: 1}); got != 3000+1500+3+4 {
		t.Fatalf("cost = %d", got)
	}
	if got := p.WorstCost(1000, 100); got != 3750+1500 {
		t.Fatalf("worst cost = %d (every input token at the dearest input price)", got)
	}
	if got := p.Cost(Tokens{Input: math.MaxInt64, Output: math.MaxInt64}); got != math.MaxInt64 {
		t.Fatalf("huge counts: %d, want saturation", got)
	}
	if got := (Tokens{Input: math.MaxInt64, Output: 1}).Total(); got != math.MaxInt64 {
		t.Fatalf("total saturates: %d", got)
	}
	if got := perMillion(1, 1); got != 1 {
		t.Fatalf("a fraction of a micro-unit rounds up: %d", got)
	}
}

func TestPeriodStart(t *testing.T) {
	at := time.Date(2026, 3, 31, 23, 30, 0, 0, time.FixedZone("x", -2*3600)) // 2026-04-01 01:30 UTC
	if got := PeriodStart(PeriodDay, at); !got.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("day: %v", got)
	}
	if got := PeriodStart(PeriodMonth, at); !got.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("month: %v", got)
	}
}
