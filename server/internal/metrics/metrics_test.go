package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
)

var serverNames = []string{
	"clawguard_guard_decisions_total",
	"clawguard_guard_queries_total",
	"clawguard_guard_decision_seconds",
	"clawguard_guard_mode_decisions_total",
	"clawguard_guard_decisions_shed_total",
	"clawguard_guard_admission_limit",
	"clawguard_guard_admitted_seconds",
	"clawguard_guard_log_batch_seconds",
	"clawguard_guard_log_batch_size",
	"clawguard_guard_snapshot_decisions_total",
	"clawguard_guard_snapshot_refreshes_total",
	"clawguard_guard_snapshot_refresh_errors_total",
	"clawguard_guard_snapshot_revision",
	"clawguard_guard_snapshot_tables_unmirrored",
	"clawguard_approvals_partial_approvals_total",
	"clawguard_approvals_escalation_steps_total",
	"clawguard_approvals_holds_created_total",
	"clawguard_approvals_holds_resolved_total",
	"clawguard_approvals_holds_pending",
	"clawguard_approvals_oldest_pending_hold_seconds",
	"clawguard_approvals_time_to_resolve_seconds",
	"clawguard_approvals_webhook_failures_total",
	"clawguard_approvals_webhook_lag_seconds",
	"clawguard_decision_export_batches_total",
	"clawguard_decision_export_decisions_total",
	"clawguard_decision_export_lag_seconds",
	"clawguard_registry_conformance_refusals_total",
	"clawguard_registry_runners_live",
	"clawguard_registry_lease_expirations_total",
	"clawguard_registry_pushes_pending",
	"clawguard_server_panics_total",
	"clawguard_database_synchronous_standbys",
	"clawguard_database_replication",
	"clawguard_model_tokens_total",
	"clawguard_model_cost_micros_total",
	"clawguard_model_calls_total",
	"clawguard_model_reservations_total",
}

func gatheredNames(t *testing.T, g prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names
}

func TestNewMetricsRegistersEverySeriesAfterPreInit(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.PreInit([]string{"a2a.send", "agents.create"}, []string{"a2a_message_gate", "create_agent"})
	// Series labelled by provider and model are made by the first call.
	m.Models.Settled("anthropic", "claude-sonnet-4-5", "complete", [4]int64{1, 1, 1, 1}, 1)

	names := gatheredNames(t, reg)
	for _, n := range serverNames {
		if !names[n] {
			t.Errorf("metric %s not exported after PreInit", n)
		}
	}
	if len(names) != len(serverNames) {
		t.Errorf("exported %d metric families, want %d: %v", len(names), len(serverNames), names)
	}
}

func TestPreInitCreatesEveryLabelCombination(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	actions := []string{"a2a.send", "agents.create", "roles.grant"}
	kinds := []string{"a2a_message_gate", "create_agent", "cli_command", "onecli_credential"}
	m.PreInit(actions, kinds)

	cases := []struct {
		name string
		want int
	}{
		{"clawguard_guard_decisions_total", len(actions) * len(Effects)},
		{"clawguard_guard_queries_total", len(actions) * len(Effects) * len(QueryKinds)},
		{"clawguard_guard_decision_seconds", len(Effects)},
		{"clawguard_guard_mode_decisions_total", len(actions) * len(Modes) * 2},
		{"clawguard_approvals_partial_approvals_total", len(kinds)},
		{"clawguard_approvals_escalation_steps_total", len(EscalationSteps)},
		{"clawguard_approvals_holds_created_total", len(kinds)},
		{"clawguard_approvals_holds_resolved_total", len(kinds) * len(Outcomes)},
		{"clawguard_approvals_holds_pending", len(kinds)},
		{"clawguard_approvals_time_to_resolve_seconds", len(kinds) * len(ResolveChannels)},
	}
	for _, c := range cases {
		got, err := testutil.GatherAndCount(reg, c.name)
		if err != nil {
			t.Fatalf("count %s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: %d series, want %d", c.name, got, c.want)
		}
	}
	if v := testutil.ToFloat64(m.DecisionsTotal.WithLabelValues("roles.grant", "deny")); v != 0 {
		t.Errorf("pre-initialised counter = %v, want 0", v)
	}
}

func TestObserveHelpersCount(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.ObserveDecision("a2a.send", "hold", 700*time.Microsecond)
	m.ObserveDecision("a2a.send", "hold", time.Millisecond)
	m.ObserveResolved("a2a_message_gate", "approve", "telegram", 90*time.Second)

	if v := testutil.ToFloat64(m.DecisionsTotal.WithLabelValues("a2a.send", "hold")); v != 2 {
		t.Errorf("decisions{a2a.send,hold} = %v, want 2", v)
	}
	if v := testutil.ToFloat64(m.HoldsResolvedTotal.WithLabelValues("a2a_message_gate", "approve")); v != 1 {
		t.Errorf("holds_resolved{a2a_message_gate,approve} = %v, want 1", v)
	}
	var got dto.Metric
	if err := m.TimeToResolveSeconds.WithLabelValues("a2a_message_gate", "telegram").(prometheus.Histogram).Write(&got); err != nil {
		t.Fatal(err)
	}
	if n, sum := got.GetHistogram().GetSampleCount(), got.GetHistogram().GetSampleSum(); n != 1 || sum != 90 {
		t.Errorf("time_to_resolve{a2a_message_gate,telegram} = %d samples summing %vs, want the one of 90s", n, sum)
	}
}

func TestRegisteringTwiceOnOneRegistryPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	defer func() {
		if recover() == nil {
			t.Fatal("second NewMetrics on the same registry did not panic")
		}
	}()
	NewMetrics(reg)
}

// fakeServices stands in for a *grpc.Server in InitializeMetrics.
type fakeServices map[string]grpc.ServiceInfo

func (f fakeServices) GetServiceInfo() map[string]grpc.ServiceInfo { return f }

func TestGRPCServerMetricsExportHandledAndHandlingTime(t *testing.T) {
	reg := prometheus.NewRegistry()
	gm := NewGRPCServerMetrics(reg)
	gm.InitializeMetrics(fakeServices{
		"clawguard.guard.v1.Guard": {Methods: []grpc.MethodInfo{{Name: "Decide"}}},
	})
	names := gatheredNames(t, reg)
	for _, n := range []string{"grpc_server_handled_total", "grpc_server_handling_seconds", "grpc_server_started_total"} {
		if !names[n] {
			t.Errorf("%s not exported after InitializeMetrics (got %v)", n, names)
		}
	}
}

func TestHandlerServesExposition(t *testing.T) {
	reg := NewRegistry()
	m := NewMetrics(reg)
	m.RunnersLive.Set(2)

	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	for _, want := range []string{"clawguard_registry_runners_live 2", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// TestBuildInfo: clawguard_build_info{version, goversion} is 1.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterBuildInfo(reg, "v1.2.3-4-gabc")
	n, err := testutil.GatherAndCount(reg, "clawguard_build_info")
	if err != nil || n != 1 {
		t.Fatalf("build_info series: %d %v", n, err)
	}
	mfs, _ := reg.Gather()
	l := mfs[0].GetMetric()[0]
	if l.GetGauge().GetValue() != 1 || l.GetLabel()[1].GetName() != "version" || l.GetLabel()[1].GetValue() != "v1.2.3-4-gabc" {
		t.Fatalf("build_info: %v", l)
	}
}

// Model labels are bounded: past MaxModelLabels distinct models (or for an
// empty name) the label is "other", however many an agent names.
func TestModelLabelsAreBounded(t *testing.T) {
	l := NewModelLabels(2)
	for i, c := range [][2]string{{"a", "a"}, {"b", "b"}, {"c", "other"}, {"a", "a"}, {"", "other"}, {"d", "other"}} {
		if got := l.Label(c[0]); got != c[1] {
			t.Errorf("%d: Label(%q) = %q, want %q", i, c[0], got, c[1])
		}
	}
}
