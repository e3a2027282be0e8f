package ncl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const providerKey = "sk-ant-e2e-SECRET-0123456789abcdef"

// ncl models: providers with a credential from a file (never shown
// again), a group's providers, rules, default and budget by the group's
// name, prices; bad values are usage errors or refused.
func TestModelSettings(t *testing.T) {
	srv := startRealServer(t)
	srv.must(t, "groups", "create", "--name", "research")
	keyFile := filepath.Join(t.TempDir(), "anthropic.key")
	if err := os.WriteFile(keyFile, []byte(providerKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.must(t, "models", "providers", "set", "--name", "anthropic", "--kind", "anthropic", "--credential-file", keyFile)
	srv.must(t, "models", "providers", "set", "--name", "local", "--kind", "openai", "--base-url", "http://10.0.0.5:8000/v1/")
	out := srv.must(t, "models", "providers", "list")
	for _, want := range []string{"anthropic", "https://api.anthropic.com", "set 20", "local", "http://10.0.0.5:8000/v1", "none"} {
		if !strings.Contains(out, want) {
			t.Fatalf("providers list lacks %q:\n%s", want, out)
		}
	}
	srv.must(t, "models", "use", "--group", "research", "--provider", "anthropic", "--provider", "local")
	srv.must(t, "models", "set", "--group", "research", "--provider", "anthropic", "--model", "claude-*", "--effect", "allow")
	srv.must(t, "models", "set", "--group", "research", "--provider", "anthropic", "--model", "claude-opus-*", "--effect", "hold")
	srv.must(t, "models", "default", "--group", "research", "--effect", "deny")
	srv.must(t, "models", "prices", "set", "--provider", "anthropic", "--model", "claude-*", "--input", "3", "--output", "15", "--cache-read", "0.3")
	budget := srv.must(t, "models", "budget", "set", "--group", "research", "--period", "day", "--tokens", "2000000", "--cost", "12.5")
	for _, want := range []string{"day", "0 of 2000000 spent, 0 reserved", "0 of 12.5 spent", "hold"} {
		if !strings.Contains(budget, want) {
			t.Fatalf("budget set lacks %q:\n%s", want, budget)
		}
	}
	pol := jsonObj(t, srv.must(t, "models", "list", "--group", "research", "-o", "json"))
	if pol["default_effect"] != "deny" || len(pol["rules"].([]any)) != 2 || len(pol["providers"].([]any)) != 2 || pol["budget"] == nil {
		t.Fatalf("models list -o json: %v", pol)
	}
	if out := srv.must(t, "models", "prices", "list"); !strings.Contains(out, "claude-*") || !strings.Contains(out, "0.3") || !strings.Contains(out, "15") {
		t.Fatalf("prices list:\n%s", out)
	}
	srv.must(t, "models", "unset", "--group", "research", "--provider", "anthropic", "--model", "claude-opus-*")
	srv.must(t, "models", "budget", "unset", "--group", "research")
	if r := srv.ncl(t, "models", "budget", "get", "--group", "research"); r.code == 0 {
		t.Fatalf("budget get after unset: %s", r.out)
	}
	if out := srv.must(t, "usage", "--group", "research"); !strings.Contains(out, "DAY") {
		t.Fatalf("usage:\n%s", out)
	}
	for _, bad := range [][]string{
		{"models", "set", "--group", "research", "--provider", "anthropic", "--model", "x", "--effect", "maybe"},
		{"models", "budget", "set", "--group", "research", "--period", "week", "--tokens", "5"},
		{"models", "budget", "set", "--group", "research", "--period", "day", "--cost", "-1"},
		{"models", "prices", "set", "--provider", "anthropic", "--model", "x", "--input", "0.0000001"},
		{"models", "use", "--group", "research"},
		{"models", "providers", "set", "--name", "x", "--kind", "gemini"},
	} {
		if r := srv.ncl(t, bad...); r.code != ExitUsage {
			t.Errorf("%v: exit %d, want usage (%s)", bad, r.code, r.err)
		}
	}
	for _, bad := range [][]string{
		{"models", "set", "--group", "research", "--provider", "anthropic", "--model", "*-mini", "--effect", "allow"},
		{"models", "use", "--group", "research", "--provider", "nope"},
		{"models", "providers", "delete", "--name", "anthropic"}, // the group is given it
		{"models", "budget", "set", "--group", "research", "--period", "day"},
	} {
		if r := srv.ncl(t, bad...); r.code != 1 || r.err == "" {
			t.Errorf("%v: exit %d (%s), want refused", bad, r.code, r.err)
		}
	}
	// Nothing any read prints carries the key.
	for _, args := range [][]string{{"models", "providers", "list", "-o", "json"}, {"models", "list", "--group", "research"}, {"export"}} {
		if out := srv.must(t, args...); strings.Contains(out, providerKey) {
			t.Fatalf("%v printed the provider's key", args)
		}
	}
}

// The model settings are part of ncl export / apply: the credential as a
// reference (<redacted>: keep the server's), a round trip changes nothing,
// an edit applies exactly its changes.
func TestModelSettingsExportAndApply(t *testing.T) {
	srv := startRealServer(t)
	srv.must(t, "groups", "create", "--name", "research")
	keyFile := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(keyFile, []byte(providerKey), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.must(t, "models", "providers", "set", "--name", "anthropic", "--kind", "anthropic", "--credential-file", keyFile)
	srv.must(t, "models", "use", "--group", "research", "--provider", "anthropic")
	srv.must(t, "models", "set", "--group", "research", "--provider", "anthropic", "--model", "claude-opus-*", "--effect", "hold")
	srv.must(t, "models", "budget", "set", "--group", "research", "--period", "month", "--tokens", "900", "--on-exceed", "deny")
	srv.must(t, "models", "prices", "set", "--provider", "anthropic", "--model", "claude-*", "--input", "3", "--output", "15")
	exported := srv.must(t, "export")
	for _, want := range []string{"modelProviders:", "credential: <redacted>", "baseUrl: https://api.anthropic.com", "modelPrices:",
		"inputMicros: 3000000", "models:", "- anthropic", "model: claude-opus-*", "effect: hold", "period: month", "tokens: 900", "onExceed: deny"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	if strings.Contains(exported, providerKey) {
		t.Fatal("export wrote the provider's key")
	}
	if r := srv.applyFile(t, exported, "--dry-run"); r.code != 0 || strings.TrimSpace(r.out) != "No changes." {
		t.Fatalf("round trip: exit %d, %q", r.code, r.out)
	}
	edited := strings.Replace(exported, "effect: hold", "effect: deny", 1)
	edited = strings.Replace(edited, "tokens: 900", "tokens: 1200", 1)
	r := srv.applyFile(t, edited)
	if r.code != 0 || !strings.Contains(r.out, "model rule anthropic/claude-opus-* of group research: hold → deny") ||
		!strings.Contains(r.out, "model budget of group research") {
		t.Fatalf("apply: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	if r := srv.applyFile(t, edited, "--dry-run"); strings.TrimSpace(r.out) != "No changes." {
		t.Fatalf("second apply: %q", r.out)
	}
	// The credential the server holds was kept, not overwritten.
	var cred string
	if err := srv.DB(t).QueryRow(context.Background(), `SELECT credential FROM model_providers WHERE name = 'anthropic'`).Scan(&cred); err != nil || cred != providerKey {
		t.Fatalf("the credential after apply: %v (kept: %v)", err, cred == providerKey)
	}
	// Without the models block, --prune takes the group's settings away.
	doc, err := parseState(strings.NewReader(edited))
	if err != nil {
		t.Fatal(err)
	}
	doc.Groups[0].Models = nil
	pruned, err := doc.yaml()
	if err != nil {
		t.Fatal(err)
	}
	r = srv.applyFile(t, string(pruned), "--prune")
	if r.code != 0 || !strings.Contains(r.out, "model providers of group research: anthropic → none") ||
		!strings.Contains(r.out, "- model budget of group research") || !strings.Contains(r.out, "- model rule anthropic/claude-opus-*") {
		t.Fatalf("prune: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
}
