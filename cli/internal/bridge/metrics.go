package bridge

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a bridge's Prometheus metrics, named after its chat
// (clawguard_telegram_*, clawguard_slack_*): small fixed label sets,
// pre-initialised so rates show from the first scrape.
type Metrics struct {
	MessagesIn  *prometheus.CounterVec // by route outcome
	MessagesOut *prometheus.CounterVec // by kind: reply, notice, answer, prompt
	Cards       *prometheus.CounterVec // by event: sent, edited, skipped
	Clicks      *prometheus.CounterVec // by result: resolved, awaiting_reason, refused, stale, error
	Errors      *prometheus.CounterVec // by op
}

// NewMetrics registers the metrics of the chat named chat (its label in
// the metric names and help) with reg; ops are the chat's own operations
// beside the common ones (Telegram's get_updates, Slack's socket).
func NewMetrics(reg prometheus.Registerer, chat, title string, ops ...string) *Metrics {
	prefix := "clawguard_" + chat + "_"
	m := &Metrics{
		MessagesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "messages_in_total", Help: title + " messages routed to the control plane, by route outcome.",
		}, []string{"outcome"}),
		MessagesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "messages_out_total", Help: "Messages the bridge sent to " + title + " chats, by kind.",
		}, []string{"kind"}),
		Cards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "cards_total", Help: "Approval cards sent and edited.",
		}, []string{"event"}),
		Clicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "clicks_total", Help: "Card button presses, by result.",
		}, []string{"result"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "errors_total", Help: "Failed calls, by operation.",
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
	for _, op := range append(ops, "route", "watch", "outbox", "send", "edit", "resolve", "state") {
		m.Errors.WithLabelValues(op)
	}
	return m
}
