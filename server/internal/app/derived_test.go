package app

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

// The security-relevant lists are read from the catalog, not kept by hand:
// the hold kinds a bridge may not request, every hold kind, and the metric
// label sets. Registering one more entry updates all of them.
func TestSecurityListsFollowTheCatalog(t *testing.T) {
	cat, err := BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	// Today's decision-made kinds (once a hand-kept list in the api package).
	for _, k := range []string{"cli_command", "create_agent", "install_packages", "add_mcp_server", "a2a_message_gate", "sender_admit"} {
		if !slices.Contains(cat.ApprovalKinds(), k) {
			t.Errorf("approval kind %s not derived from the catalog", k)
		}
		if status.Code(api.RequestableKind(cat, k)) != codes.InvalidArgument {
			t.Errorf("a bridge may Request a %s hold", k)
		}
	}
	for _, k := range approvals.RequestKinds {
		if err := api.RequestableKind(cat, k); err != nil {
			t.Errorf("requested kind %s refused: %v", k, err)
		}
	}

	// A new gate with its own approval kind.
	cat.MustRegister(guard.Entry{Action: "t.new_gate", ApprovalAction: "t_new_kind",
		Baseline: func(*guard.Input, guard.Facts) (guard.Decision, error) { return guard.Allow("x"), nil }})
	if status.Code(api.RequestableKind(cat, "t_new_kind")) != codes.InvalidArgument {
		t.Error("a new entry's approval kind may be requested by a bridge")
	}
	kinds := approvals.HoldKinds(cat.ApprovalKinds())
	if !slices.Contains(kinds, "t_new_kind") || !slices.Contains(kinds, approvals.KindOneCLICredential) {
		t.Fatalf("hold kinds = %v, want the new kind and the requested ones", kinds)
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewMetrics(reg)
	m.PreInit(cat.Actions(), kinds)
	if v := testutil.ToFloat64(m.HoldsCreatedTotal.WithLabelValues("t_new_kind")); v != 0 || !slices.Contains(m.HoldKinds(), "t_new_kind") {
		t.Fatal("hold metrics not pre-initialised for the new kind")
	}
	n, err := testutil.GatherAndCount(reg, "clawguard_guard_decisions_total")
	if err != nil || n != len(cat.Actions())*len(metrics.Effects) {
		t.Fatalf("decision series = %d (%v), want one per action and effect (%d)", n, err, len(cat.Actions())*len(metrics.Effects))
	}
}
