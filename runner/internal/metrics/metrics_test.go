package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var runnerNames = []string{
	"clawguard_runner_stream_connected",
	"clawguard_runner_stream_reconnects_total",
	"clawguard_runner_container_spawns_total",
	"clawguard_runner_containers_running",
	"clawguard_runner_delivery_actions_total",
	"clawguard_runner_pushes_applied_total",
	"clawguard_runner_lease_fences_total",
	"clawguard_runner_lease_fenced",
	"clawguard_runner_inbox_stalled_restarts_total",
	"clawguard_runner_gateway_refusals_total",
}

func TestNewMetricsRegistersEverySeriesAfterPreInit(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.PreInit([]string{"send_message", "create_agent"})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range runnerNames {
		if !names[n] {
			t.Errorf("metric %s not exported after PreInit", n)
		}
	}
	if len(names) != len(runnerNames) {
		t.Errorf("exported %d metric families, want %d: %v", len(names), len(runnerNames), names)
	}
}

func TestPreInitCreatesEveryLabelCombination(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	actions := []string{"send_message", "create_agent", "install_packages"}
	m.PreInit(actions)

	for name, want := range map[string]int{
		"clawguard_runner_delivery_actions_total": len(actions) * len(Effects),
		"clawguard_runner_container_spawns_total": len(SpawnResults),
	} {
		got, err := testutil.GatherAndCount(reg, name)
		if err != nil {
			t.Fatalf("count %s: %v", name, err)
		}
		if got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
}

func TestStreamStateAndHandler(t *testing.T) {
	reg := NewRegistry()
	m := NewMetrics(reg)
	m.SetStreamConnected(true)
	m.ContainerSpawnsTotal.WithLabelValues("failed").Inc()
	if v := testutil.ToFloat64(m.StreamConnected); v != 1 {
		t.Fatalf("stream_connected = %v after connect, want 1", v)
	}
	m.SetStreamConnected(false)

	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"clawguard_runner_stream_connected 0",
		`clawguard_runner_container_spawns_total{result="failed"} 1`,
		`clawguard_runner_container_spawns_total{result="ok"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}
