package bridge

import (
	"log/slog"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// --console-url: an http(s) base URL or nothing; with it, a hold the
// server marks step_up links to its console page, any other does not.
func TestConsoleURLLinksStepUpHoldsOnly(t *testing.T) {
	for _, bad := range []string{"console.example", "ftp://console.example", "https://console.example/?x=1", "https://"} {
		cfg := Defaults(t.TempDir(), "")
		cfg.Server, cfg.ConsoleURL = "127.0.0.1:7443", bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--console-url") {
			t.Errorf("--console-url %q: %v", bad, err)
		}
	}
	cfg := Defaults(t.TempDir(), "")
	cfg.ConsoleURL = "https://console.example/cg/"
	b, err := New(cfg, Spec{Namespace: "test", Title: "Test"}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	opts := []*guardv1.HoldOption{{Label: "Approve", Value: "approve"}}
	if got := b.cardButtons(&guardv1.Hold{Id: "ho_1", StepUp: true, Options: opts}); len(got) != 2 || got[0].URL != "https://console.example/cg/holds/ho_1" {
		t.Fatalf("a step-up hold's buttons %+v", got)
	}
	if got := b.cardButtons(&guardv1.Hold{Id: "ho_2", Options: opts}); len(got) != 1 || got[0].URL != "" {
		t.Fatalf("a plain hold's buttons %+v", got)
	}
}
