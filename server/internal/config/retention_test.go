package config

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestRetentionFlagsAndValidation(t *testing.T) {
	t.Setenv("CLAWGUARD_EVENT_RETENTION", "48h")
	c := Default()
	c.DatabaseURL = "postgres://127.0.0.1/db"
	if c.DecisionRetention != 720*time.Hour || c.EventRetention != 720*time.Hour {
		t.Fatalf("defaults: %v %v", c.DecisionRetention, c.EventRetention)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse([]string{"--decision-retention", "0"}); err != nil {
		t.Fatal(err)
	}
	if c.DecisionRetention != 0 || c.EventRetention != 48*time.Hour {
		t.Fatalf("flag/env not applied: %v %v", c.DecisionRetention, c.EventRetention)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("0 = forever must be valid: %v", err)
	}
	bad := map[string]func(*Config){
		"must not be negative":  func(c *Config) { c.EventRetention = -time.Hour },
		"10 citation windows":   func(c *Config) { c.DecisionRetention = 5 * c.CitationWindow },
		"must not be negative ": func(c *Config) { c.DecisionRetention = -1 },
	}
	for want, mutate := range bad {
		c := Default()
		c.DatabaseURL = "postgres://127.0.0.1/db"
		mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(want)) {
			t.Errorf("%q: got %v", want, err)
		}
	}
}
