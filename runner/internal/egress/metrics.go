package egress

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes are the values of the outcome label of egress connections.
var Outcomes = []string{
	"allowed",   // the guard allowed it and it connected
	"denied",    // the guard denied it (or its hold was rejected)
	"held",      // held past the wait, or its hold expired
	"blocked",   // a private, loopback, metadata or own address: never reachable
	"limited",   // a per-session limit refused it
	"failed",    // allowed, but resolving or connecting failed
	"invalid",   // not a request the proxy forwards
	"undecided", // the guard could not be asked
}

// Metrics are the egress proxy's metrics (clawguard_runner_egress_*): no
// ids in labels.
type Metrics struct {
	Connections *prometheus.CounterVec   // {outcome}
	Bytes       *prometheus.CounterVec   // {direction}: out (agent → destination), in
	Duration    prometheus.Histogram     // an allowed connection's life
	Setup       *prometheus.HistogramVec // {outcome}: request to answer (decision, resolve, dial)
	Open        prometheus.Gauge
	Cut         prometheus.Counter // connections cut by a freeze or a stopped session
}

// NewMetrics builds and registers the egress metrics, every outcome at zero.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "egress_connections_total",
			Help: "Agents' outbound connections through the egress proxy, by outcome (allowed, denied, held, blocked, limited, failed, invalid, undecided).",
		}, []string{"outcome"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "egress_bytes_total",
			Help: "Bytes through agents' outbound connections, by direction (out: agent to destination; in: back).",
		}, []string{"direction"}),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "egress_connection_seconds",
			Help:    "How long agents' allowed outbound connections stayed open.",
			Buckets: []float64{0.01, 0.1, 1, 10, 60, 300, 1800, 3600, 4 * 3600},
		}),
		Setup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "egress_setup_seconds",
			Help:    "From an agent's connection request to the proxy's answer (decision, resolution and dial), by outcome.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30},
		}, []string{"outcome"}),
		Open: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "egress_open_connections",
			Help: "Agents' outbound connections open now.",
		}),
		Cut: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "egress_cut_total",
			Help: "Open outbound connections the runner cut because their session was frozen or stopped.",
		}),
	}
	reg.MustRegister(m.Connections, m.Bytes, m.Duration, m.Setup, m.Open, m.Cut)
	for _, o := range Outcomes {
		m.Connections.WithLabelValues(o)
		m.Setup.WithLabelValues(o)
	}
	m.Bytes.WithLabelValues("out")
	m.Bytes.WithLabelValues("in")
	return m
}

func (m *Metrics) outcome(o string, setup time.Duration) {
	if m == nil {
		return
	}
	m.Connections.WithLabelValues(o).Inc()
	m.Setup.WithLabelValues(o).Observe(setup.Seconds())
}

func (m *Metrics) closed(out, in int64, life time.Duration) {
	if m == nil {
		return
	}
	m.Bytes.WithLabelValues("out").Add(float64(out))
	m.Bytes.WithLabelValues("in").Add(float64(in))
	m.Duration.Observe(life.Seconds())
}
