// Package metrics holds every Prometheus metric a runner exports.
//
// Names follow clawguard_runner_<name>_{total,seconds}; labels come from small
// fixed sets (action, effect, result) and never carry ids. deploy/ (alerts and
// the Grafana dashboard) names these metrics; a test there fails if any name it
// uses is not registered here.
package metrics

import (
	"net/http"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Effects are the values of the effect label on delivery actions: the guard's
// three answers, plus error when no answer could be had (the action did not run).
var Effects = []string{"allow", "hold", "deny", "error"}

// SpawnResults are the values of the result label on container spawns.
var SpawnResults = []string{"ok", "failed"}

// GatewayLimits are the values of the limit label on gateway refusals
// (gateway.LimitRate, gateway.LimitInFlight).
var GatewayLimits = []string{"rate", "in_flight"}

// Metrics is the runner's metric set; one per process, built by NewMetrics.
type Metrics struct {
	StreamConnected       prometheus.Gauge       // 1 while the DecideStream and Connect streams are up
	StreamReconnectsTotal prometheus.Counter     //
	ContainerSpawnsTotal  *prometheus.CounterVec // {result}
	ContainersRunning     prometheus.Gauge       //
	DeliveryActionsTotal  *prometheus.CounterVec // {action, effect}
	PushesAppliedTotal    prometheus.Counter     //
	// The lease fence: agents stopped because the lease was not renewed in time.
	LeaseFencesTotal prometheus.Counter //
	LeaseFenced      prometheus.Gauge   // 1 while fenced
	// Agents restarted for holding inbox items unacknowledged past the deadline.
	InboxStalledRestartsTotal prometheus.Counter //
	// Agents' sends refused at a gateway limit.
	GatewayRefusalsTotal *prometheus.CounterVec // {limit}
}

// NewMetrics builds the runner's metrics and registers them on reg; it panics
// if a name is already registered there (a wiring bug, found at start-up).
// Spawn results are pre-initialised here; delivery actions need PreInit.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		StreamConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "stream_connected",
			Help: "1 while the runner's DecideStream and Connect streams to the server are up, else 0.",
		}),
		StreamReconnectsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "stream_reconnects_total",
			Help: "Times the runner re-established its streams to the server.",
		}),
		ContainerSpawnsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "container_spawns_total",
			Help: "Agent container spawns, by result (ok, failed).",
		}, []string{"result"}),
		ContainersRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "containers_running",
			Help: "Agent containers this runner has running.",
		}),
		DeliveryActionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "delivery_actions_total",
			Help: "Delivery actions from agent containers, by action and guard effect (allow, hold, deny, error).",
		}, []string{"action", "effect"}),
		PushesAppliedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "pushes_applied_total",
			Help: "Server pushes (replays, a2a deliveries, container restarts) applied by this runner.",
		}),
		LeaseFencesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "lease_fences_total",
			Help: "Times the runner stopped its agents because it could not renew its lease before the lease could expire.",
		}),
		LeaseFenced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "lease_fenced",
			Help: "1 while the runner's agents are stopped and pushes refused because its lease is not renewed, else 0.",
		}),
		InboxStalledRestartsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "inbox_stalled_restarts_total",
			Help: "Agents restarted because they held inbox items without acknowledging any past the ack deadline.",
		}),
		GatewayRefusalsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "gateway_refusals_total",
			Help: "Agents' sends the gateway refused at one of its per-session limits, by limit (rate, in_flight): --gateway-rate, --gateway-burst, --gateway-in-flight.",
		}, []string{"limit"}),
	}
	reg.MustRegister(
		m.StreamConnected, m.StreamReconnectsTotal, m.ContainerSpawnsTotal,
		m.ContainersRunning, m.DeliveryActionsTotal, m.PushesAppliedTotal,
		m.LeaseFencesTotal, m.LeaseFenced, m.InboxStalledRestartsTotal, m.GatewayRefusalsTotal,
	)
	for _, r := range SpawnResults {
		m.ContainerSpawnsTotal.WithLabelValues(r)
	}
	for _, l := range GatewayLimits {
		m.GatewayRefusalsTotal.WithLabelValues(l)
	}
	return m
}

// PreInit creates every action×effect series at zero so rates show from the
// first scrape; actions are the runner's delivery action names.
func (m *Metrics) PreInit(actions []string) {
	for _, a := range actions {
		for _, e := range Effects {
			m.DeliveryActionsTotal.WithLabelValues(a, e)
		}
	}
}

// SetStreamConnected records whether the runner's streams are up.
func (m *Metrics) SetStreamConnected(up bool) {
	if up {
		m.StreamConnected.Set(1)
		return
	}
	m.StreamConnected.Set(0)
}

// RegisterBuildInfo exports clawguard_build_info{version, goversion} = 1.
func RegisterBuildInfo(reg prometheus.Registerer, version string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "clawguard", Name: "build_info",
		Help: "Always 1; the labels say which build this process runs.",
	}, []string{"version", "goversion"})
	reg.MustRegister(g)
	g.WithLabelValues(version, runtime.Version()).Set(1)
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition format (mount it at /metrics).
func Handler(reg prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
