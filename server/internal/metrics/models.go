package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The model gateway's metering (clawguard_model_*), counted where a call is
// settled. Providers are the operator's, a handful; model names come from
// agents' calls (allowed ones: a call is settled only after its model.call
// ALLOW), so a process labels at most MaxModelLabels distinct models and
// counts the rest as "other" — an agent cannot grow the series without
// bound by naming models.

// TokenKinds are the values of the kind label of ModelTokensTotal.
var TokenKinds = []string{"input", "output", "cache_read", "cache_write"}

// SettleOutcomes are the values of the outcome label of ModelCallsTotal:
// the provider's usage came whole, a cut call settled at its bound, or a
// reservation never settled, swept to its worst case.
var SettleOutcomes = []string{"complete", "incomplete", "swept"}

// ReserveOutcomes are the values of the outcome label of
// ModelReservationsTotal.
var ReserveOutcomes = []string{"reserved", "over_budget", "past_budget"}

// MaxModelLabels bounds the distinct model label values of a process.
const MaxModelLabels = 100

// ModelMetrics are the model gateway's server-side metrics.
type ModelMetrics struct {
	TokensTotal       *prometheus.CounterVec // {provider, model, kind}
	CostMicrosTotal   *prometheus.CounterVec // {provider, model}
	CallsTotal        *prometheus.CounterVec // {provider, model, outcome}
	ReservationsTotal *prometheus.CounterVec // {outcome}

	labels *ModelLabels
}

func newModelMetrics(reg prometheus.Registerer) *ModelMetrics {
	m := &ModelMetrics{
		TokensTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "model", Name: "tokens_total",
			Help: "Tokens of agents' model calls as their providers reported them, by provider, model and kind (input, output, cache_read, cache_write).",
		}, []string{"provider", "model", "kind"}),
		CostMicrosTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "model", Name: "cost_micros_total",
			Help: "What agents' model calls cost at the operator's prices, in micro-units, by provider and model.",
		}, []string{"provider", "model"}),
		CallsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "model", Name: "calls_total",
			Help: "Agents' model calls settled, by provider, model and outcome (complete, incomplete: cut and settled at its bound, swept: never settled by its runner).",
		}, []string{"provider", "model", "outcome"}),
		ReservationsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "model", Name: "reservations_total",
			Help: "Model calls' budget reservations, by outcome (reserved, over_budget: refused, the call asks model.budget; past_budget: reserved past the budget with an approval).",
		}, []string{"outcome"}),
		labels: NewModelLabels(MaxModelLabels),
	}
	reg.MustRegister(m.TokensTotal, m.CostMicrosTotal, m.CallsTotal, m.ReservationsTotal)
	for _, o := range ReserveOutcomes {
		m.ReservationsTotal.WithLabelValues(o)
	}
	return m
}

// Settled counts one settled call.
func (m *ModelMetrics) Settled(provider, model, outcome string, tokens [4]int64, cost int64) {
	if m == nil {
		return
	}
	model = m.labels.Label(model)
	m.CallsTotal.WithLabelValues(provider, model, outcome).Inc()
	for i, k := range TokenKinds {
		if tokens[i] > 0 {
			m.TokensTotal.WithLabelValues(provider, model, k).Add(float64(tokens[i]))
		}
	}
	if cost > 0 {
		m.CostMicrosTotal.WithLabelValues(provider, model).Add(float64(cost))
	}
}

// Reserved counts a reservation's outcome.
func (m *ModelMetrics) Reserved(outcome string) {
	if m != nil {
		m.ReservationsTotal.WithLabelValues(outcome).Inc()
	}
}

// ModelLabels hands out a bounded set of model label values: the first n
// distinct models keep their names, later ones read "other".
type ModelLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

// NewModelLabels bounds the distinct labels at n.
func NewModelLabels(n int) *ModelLabels { return &ModelLabels{max: n, seen: map[string]bool{}} }

// Label is the label value of a model.
func (l *ModelLabels) Label(model string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[model] {
		return model
	}
	if len(l.seen) >= l.max || model == "" {
		return "other"
	}
	l.seen[model] = true
	return model
}
