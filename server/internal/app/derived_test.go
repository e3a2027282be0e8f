package app

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/registry"
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

// ApplyAction performs exactly what the domains hand apply steps for, and
// the registry refuses an apply step the catalog has no entry for (or a
// second one for an action).
func TestAppliedActionsFollowTheDomains(t *testing.T) {
	cat, err := BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	known := registry.CatalogFunc(func(a string) bool { _, ok := cat.Lookup(a); return ok })
	svc, err := registry.New(nil, nil, nil, registry.Options{Appliers: Appliers()}, known)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a2a.send", "agents.create", "mcp.call", "self_mod.add_mcp_server", "self_mod.install_packages"}
	if got := svc.AppliedActions(); !slices.Equal(got, want) {
		t.Fatalf("applied actions = %v, want %v", got, want)
	}
	noop := func(context.Context, pgx.Tx, registry.Session, *guardv1.ApplyActionRequest) (registry.Applied, error) {
		return registry.Applied{}, nil
	}
	for name, extra := range map[string]registry.Applier{
		"not in the catalog": {Action: "t.unknown", Apply: noop},
		"a second step":      {Action: "agents.create", Apply: noop},
		"no Apply":           {Action: "senders.admit"},
	} {
		if _, err := registry.New(nil, nil, nil, registry.Options{Appliers: append(Appliers(), extra)}, known); err == nil {
			t.Errorf("%s: the registry accepted it", name)
		}
	}
}

// The hold kinds whose approval the next request uses (approvals, which
// tells the agent to ask again instead of replaying) are exactly those of
// the catalog entries marked NextRequestUses.
func TestNextUseKindsFollowTheCatalog(t *testing.T) {
	cat, err := BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	var marked []string
	for _, e := range cat.List() {
		if e.NextRequestUses {
			marked = append(marked, e.ApprovalAction)
			if !approvals.NextUseKind(e.ApprovalAction) {
				t.Errorf("%s is marked NextRequestUses, but approvals would not tell its agent to ask again (%s)", e.Action, e.ApprovalAction)
			}
		}
	}
	for _, k := range approvals.NextUseKinds() {
		if !slices.Contains(marked, k) {
			t.Errorf("approvals treats %s as used by the next request, but no catalog entry marked NextRequestUses has it", k)
		}
	}
	for _, k := range []string{"net_connect", "model_call", "model_budget"} {
		if !slices.Contains(marked, k) {
			t.Errorf("%s is not a next-use kind", k)
		}
	}
}
