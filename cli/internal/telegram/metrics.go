package telegram

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the bridge's Prometheus metrics (small fixed label sets,
// pre-initialised so rates show from the first scrape).
type Metrics struct {
	MessagesIn  *prometheus.CounterVec // by route outcome
	MessagesOut *prometheus.CounterVec // by kind: reply, notice, answer, prompt
	Cards       *prometheus.CounterVec // by event: sent, edited, skipped
	Clicks      *prometheus.CounterVec // by result: resolved, awaiting_reason, refused, stale, error
	Errors      *prometheus.CounterVec // by op
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		MessagesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawguard_telegram_messages_in_total", Help: "Telegram messages routed to the control plane, by route outcome.",
		}, []string{"outcome"}),
		MessagesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawguard_telegram_messages_out_total", Help: "Messages the bridge sent to Telegram chats, by kind.",
		}, []string{"kind"}),
		Cards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawguard_telegram_cards_total", Help: "Approval cards sent and edited.",
		}, []string{"event"}),
		Clicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawguard_telegram_clicks_total", Help: "Card button presses, by result.",
		}, []string{"result"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawguard_telegram_errors_total", Help: "Failed calls, by operation.",
		}, []string{"op"}),
	}
	reg.MustRegister(m.MessagesIn, m.MessagesOut, m.Cards, m.Clicks, m.Errors)
	for _, o := range []string{"delivered", "held", "dropped", "registration_pending", "name_captured", "reason_captured", "unspecified"} {
		m.MessagesIn.WithLabelValues(o)
	}
	for _, k := range []string{"reply", "notice", "answer", "prompt"} {
		m.MessagesOut.WithLabelValues(k)
	}
	for _, e := range []string{"sent", "edited", "skipped"} {
		m.Cards.WithLabelValues(e)
	}
	for _, r := range []string{"resolved", "awaiting_reason", "refused", "stale", "error"} {
		m.Clicks.WithLabelValues(r)
	}
	for _, op := range []string{"get_updates", "route", "watch", "outbox", "send", "edit", "resolve", "state"} {
		m.Errors.WithLabelValues(op)
	}
	return m
}
