package modelgw

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Outcomes are the values of the outcome label of model calls.
var Outcomes = []string{
	"forwarded",    // the provider answered, whole
	"cut",          // the answer ended before the provider's usage came whole
	"failed",       // the provider could not be reached
	"denied",       // the guard denied it (or its hold was rejected)
	"held",         // held past the wait (the call or going past the budget)
	"unauthorized", // no token of the session
	"invalid",      // not a call the gateway serves
	"undecided",    // the guard or the budget could not be asked
}

// maxModelLabels bounds the distinct model label values: model names come
// from agents, so past it (and for an empty one) they read "other".
const maxModelLabels = 100

// Metrics are the model gateway's (clawguard_runner_model_*): no ids in
// labels; providers are the operator's.
type Metrics struct {
	Calls     *prometheus.CounterVec   // {provider, model, outcome}
	Added     *prometheus.HistogramVec // {provider}: the gateway's time before the call leaves
	FirstByte *prometheus.HistogramVec // {provider}: request to the answer's first byte

	mu     sync.Mutex
	models map[string]bool
}

var latencyBuckets = []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// NewMetrics builds and registers the gateway's metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "model_calls_total",
			Help: "Agents' model calls through the gateway, by provider, model and outcome (forwarded, cut, failed, denied, held, unauthorized, invalid, undecided).",
		}, []string{"provider", "model", "outcome"}),
		Added: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "model_gateway_seconds",
			Help:    "What the gateway adds before a model call leaves for its provider (reading it, the decision, the reservation), by provider.",
			Buckets: latencyBuckets,
		}, []string{"provider"}),
		FirstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "runner", Name: "model_first_byte_seconds",
			Help:    "From an agent's model call to the first byte of its provider's answer, by provider.",
			Buckets: latencyBuckets,
		}, []string{"provider"}),
		models: map[string]bool{},
	}
	reg.MustRegister(m.Calls, m.Added, m.FirstByte)
	return m
}

// Example observes one call, so every family shows (listnames).
func (m *Metrics) Example() {
	m.call("example", "example", "forwarded")
	m.added("example", time.Millisecond)
	m.firstByte("example", time.Millisecond)
}

func (m *Metrics) model(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.models[name] {
		return name
	}
	if name == "" || len(m.models) >= maxModelLabels {
		return "other"
	}
	m.models[name] = true
	return name
}

func (m *Metrics) call(provider, model, outcome string) {
	if m != nil {
		m.Calls.WithLabelValues(provider, m.model(model), outcome).Inc()
	}
}

func (m *Metrics) added(provider string, d time.Duration) {
	if m != nil {
		m.Added.WithLabelValues(provider).Observe(d.Seconds())
	}
}

func (m *Metrics) firstByte(provider string, d time.Duration) {
	if m != nil {
		m.FirstByte.WithLabelValues(provider).Observe(d.Seconds())
	}
}

// retryable reports an RPC error worth sending again.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}
