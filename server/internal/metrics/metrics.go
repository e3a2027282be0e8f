// Package metrics holds every Prometheus metric the control plane exports.
//
// Names follow clawguard_<subsystem>_<name>_{total,seconds}; labels come from
// small fixed sets (action, effect, outcome) and never carry ids, so series
// counts stay bounded however many agents, holds or runners there are.
// deploy/ (recording rules, alerts, the Grafana dashboard) names these metrics;
// a test there fails if any name it uses is not registered here.
package metrics

import (
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Effects are the values of the effect label on decision metrics.
var Effects = []string{"allow", "hold", "deny"}

// Modes are the values of the mode label: the enforcement modes that let an
// action run (enforce is what decisions_total counts).
var Modes = []string{"audit", "warn"}

// Outcomes are the values of the outcome label on resolved holds.
var Outcomes = []string{"approve", "reject", "expire", "sweep"}

// QueryKinds are the values of the kind label of QueriesTotal: decisions that
// change nothing, counted apart so what-if queries and reads never move the
// enforced decision and deny rates (or fire ClawguardDenySpike).
var QueryKinds = []string{"dry_run", "read"}

// ReplicationModes are the mode label values of clawguard_database_replication
// (store.Replication.Mode; app checks the two lists agree).
var ReplicationModes = []string{"synchronous", "asynchronous", "none", "standby", "unknown"}

// Metrics is the server's metric set; one per process, built by NewMetrics.
type Metrics struct {
	// Guard. action is always a catalog action ("non_catalog" for others).
	DecisionsTotal  *prometheus.CounterVec   // {action, effect}: enforced decisions of actions that change something
	QueriesTotal    *prometheus.CounterVec   // {action, effect, kind}: dry runs (ncl explain) and reads
	DecisionSeconds *prometheus.HistogramVec // {effect}: every decision's latency, queries included
	// ModeDecisionsTotal counts decisions a gate in audit or warn mode let
	// through, by what enforce would have answered (hold or deny).
	ModeDecisionsTotal *prometheus.CounterVec // {action, mode, would_effect}
	// Admission control: decisions refused with ResourceExhausted (nothing
	// decided; the caller retries) and the adaptive limit in force.
	DecisionsShedTotal prometheus.Counter
	AdmissionLimit     prometheus.Gauge
	// AdmittedSeconds is an admitted decision's time in the server, from
	// where admission saw it (a Guard.Decide's headers read by the
	// transport; a DecideStream frame taken by its read loop) to its
	// answer: the latency the limiter steers by, queueing for a worker and
	// the CPU included, which decision_seconds (from the engine) leaves out.
	AdmittedSeconds prometheus.Histogram
	// The fact snapshot: decisions answered from it or sent live by a
	// failed revision check, its catch-ups, the revision it is at, and the
	// tables whose triggers do not match (none is served then; alert on > 0).
	// The decision log's batches: round trip and size (facts reads and log
	// rows together).
	LogBatchSeconds            prometheus.Histogram
	LogBatchSize               prometheus.Histogram
	SnapshotDecisionsTotal     *prometheus.CounterVec // {outcome}: snapshot, stale
	SnapshotRefreshesTotal     *prometheus.CounterVec // {kind}: delta, full
	SnapshotRefreshErrorsTotal prometheus.Counter
	SnapshotRevision           prometheus.Gauge
	SnapshotTablesUnmirrored   prometheus.Gauge

	// Approvals; the kind label is the hold kind (see PreInit), never a
	// catalog action.
	HoldsCreatedTotal        *prometheus.CounterVec   // {kind}
	HoldsResolvedTotal       *prometheus.CounterVec   // {kind, outcome}
	HoldsPending             *prometheus.GaugeVec     // {kind}
	OldestPendingHoldSeconds prometheus.Gauge         //
	TimeToResolveSeconds     *prometheus.HistogramVec // {kind, channel}
	ApprovalsPartialTotal    *prometheus.CounterVec   // {kind}: approvals short of a quorum
	EscalationStepsTotal     *prometheus.CounterVec   // {step: remind, escalate}: escalation steps taken (each once per hold)
	WebhookFailuresTotal     prometheus.Counter
	WebhookLagSeconds        prometheus.Gauge // age of the oldest event the webhook has not posted
	// The decision export (--decision-export-url).
	ExportBatchesTotal   *prometheus.CounterVec // {result: shipped, failed}
	ExportDecisionsTotal prometheus.Counter
	ExportLagSeconds     prometheus.Gauge // age of the oldest settled decision not yet shipped

	// Registry.
	ConformanceRefusalsTotal prometheus.Counter
	RunnersLive              prometheus.Gauge
	LeaseExpirationsTotal    prometheus.Counter
	PushesPending            prometheus.Gauge

	// Server.
	PanicsTotal prometheus.Counter

	// The model gateway's metering (models.go).
	Models *ModelMetrics

	// Database: what the server's Postgres says about its standbys
	// (store.Replication, read every few seconds).
	DatabaseSynchronousStandbys prometheus.Gauge
	DatabaseReplication         *prometheus.GaugeVec // {mode}: 1 for the current mode

	holdKinds []string // set by PreInit
}

// decisionBuckets are fine-grained below 10ms, where decisions' tails are,
// so the buckets around them are narrow enough for histogram_quantile to
// mean something.
var decisionBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075,
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
}

// resolveBuckets run from one second (a human clicking at once) to seven days.
var resolveBuckets = []float64{
	1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200,
	86400, 172800, 345600, 604800,
}

// NewMetrics builds the server's metrics and registers them on reg.
// It panics if a name is already registered there, like prometheus.MustRegister:
// that is a wiring bug, found at start-up.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		DecisionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "decisions_total",
			Help: "Enforced guard decisions about actions that change something, by catalog action and effect (allow, hold, deny); dry runs and reads are in clawguard_guard_queries_total.",
		}, []string{"action", "effect"}),
		QueriesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "queries_total",
			Help: "Guard decisions that change nothing, by catalog action, effect and kind (dry_run: ncl explain; read: list/get RPCs).",
		}, []string{"action", "effect", "kind"}),
		DecisionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "decision_seconds",
			Help:    "Time to answer a guard decision, from the engine being asked to the decision logged (database reads, hold creation and the log commit included).",
			Buckets: decisionBuckets,
		}, []string{"effect"}),
		DecisionsShedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "decisions_shed_total",
			Help: "Decisions refused by admission control (ResourceExhausted with a retry hint; nothing was decided).",
		}),
		AdmittedSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "admitted_seconds",
			Help:    "Time an admitted Guard.Decide or DecideStream frame spent in the server, from admission seeing it (the transport reading a call's headers; the stream's read loop taking a frame) to its answer: what admission control steers by.",
			Buckets: decisionBuckets,
		}),
		AdmissionLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "admission_limit",
			Help: "The adaptive limit on decisions in flight on this replica (0 when admission control is off).",
		}),
		LogBatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "log_batch_seconds",
			Help:    "Round trip of one batch of the decision pipeline (facts reads and log rows, committed).",
			Buckets: decisionBuckets,
		}),
		LogBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "log_batch_size",
			Help:    "Statements' worth of decisions in one batch of the decision pipeline (facts reads plus log rows).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		SnapshotDecisionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "snapshot_decisions_total",
			Help: "Decisions made from the replica's fact snapshot, by outcome: snapshot (answered from it), stale (the database had moved past it when the decision was logged; decided again live).",
		}, []string{"outcome"}),
		SnapshotRefreshesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "snapshot_refreshes_total",
			Help: "Catch-ups of the fact snapshot that changed it, by kind: delta (the changed keys re-read) or full (every table re-read).",
		}, []string{"kind"}),
		SnapshotRefreshErrorsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "snapshot_refresh_errors_total",
			Help: "Catch-ups of the fact snapshot that failed (retried; decisions are read live meanwhile).",
		}),
		SnapshotRevision: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "snapshot_revision",
			Help: "The fact revision the replica's snapshot is exact at.",
		}),
		SnapshotTablesUnmirrored: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "snapshot_tables_unmirrored",
			Help: "Mirrored fact tables whose triggers do not match the catalog; while any does, no snapshot is served and every decision reads its facts live.",
		}),
		ModeDecisionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "guard", Name: "mode_decisions_total",
			Help: "Decisions a gate in audit or warn mode let run, by catalog action, mode and what enforce would have answered (hold, deny).",
		}, []string{"action", "mode", "would_effect"}),
		ApprovalsPartialTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "partial_approvals_total",
			Help: "Approvals recorded toward a quorum that did not yet complete it, by hold kind.",
		}, []string{"kind"}),
		EscalationStepsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "escalation_steps_total",
			Help: "Escalation steps taken on pending holds (each once per hold across replicas), by step: remind, escalate.",
		}, []string{"step"}),
		HoldsCreatedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "holds_created_total",
			Help: "Holds created, by hold kind.",
		}, []string{"kind"}),
		HoldsResolvedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "holds_resolved_total",
			Help: "Holds resolved, by hold kind and outcome (approve, reject, expire, sweep).",
		}, []string{"kind", "outcome"}),
		HoldsPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "holds_pending",
			Help: "Holds waiting for a human, by hold kind (read from the database, so every replica reports the same).",
		}, []string{"kind"}),
		OldestPendingHoldSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "oldest_pending_hold_seconds",
			Help: "Age of the oldest pending hold in seconds; 0 when none is pending.",
		}),
		TimeToResolveSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "time_to_resolve_seconds",
			Help:    "Time from hold creation to resolution, by hold kind and the channel it was resolved from (console, telegram, slack, ncl — a user's token —, operator, expiry).",
			Buckets: resolveBuckets,
		}, []string{"kind", "channel"}),
		WebhookFailuresTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "webhook_failures_total",
			Help: "Approval lifecycle webhook deliveries that failed.",
		}),
		WebhookLagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "approvals", Name: "webhook_lag_seconds",
			Help: "Age in seconds of the oldest approval event the webhook has not posted yet (from the database: the same on every replica); 0 when caught up or no webhook is configured.",
		}),
		ExportBatchesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "decision_export", Name: "batches_total",
			Help: "Decision-export batches posted by this replica, by result (shipped, failed).",
		}, []string{"result"}),
		ExportDecisionsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "decision_export", Name: "decisions_total",
			Help: "Decisions shipped by this replica's decision export.",
		}),
		ExportLagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "decision_export", Name: "lag_seconds",
			Help: "How long the oldest settled decision not yet shipped has waited, at this replica's last attempt (0 = caught up, or another replica ships; take the max over replicas).",
		}),
		ConformanceRefusalsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "registry", Name: "conformance_refusals_total",
			Help: "Runner registrations refused because the manifest did not conform to the catalog.",
		}),
		RunnersLive: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "registry", Name: "runners_live",
			Help: "Runners holding an unexpired lease.",
		}),
		LeaseExpirationsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "registry", Name: "lease_expirations_total",
			Help: "Runner leases that expired (their sessions were reassigned).",
		}),
		PushesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "registry", Name: "pushes_pending",
			Help: "Pushes to runners queued and not yet acknowledged.",
		}),
		PanicsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "clawguard", Subsystem: "server", Name: "panics_total",
			Help: "Panics recovered in gRPC handlers (each became an Internal error).",
		}),
		DatabaseSynchronousStandbys: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "database", Name: "synchronous_standbys",
			Help: "Synchronous standbys streaming from the server's Postgres primary (0: an approval acknowledged just before a failover can be lost; -1: the server's role may not read it, grant pg_monitor).",
		}),
		DatabaseReplication: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "clawguard", Subsystem: "database", Name: "replication",
			Help: "1 for what the server's Postgres is: synchronous (a primary with a synchronous standby), asynchronous (standbys, none synchronous), none (no standby), standby (the server is connected to a standby), unknown.",
		}, []string{"mode"}),
	}
	reg.MustRegister(
		m.DecisionsTotal, m.QueriesTotal, m.DecisionSeconds, m.ModeDecisionsTotal, m.ApprovalsPartialTotal, m.EscalationStepsTotal,
		m.DecisionsShedTotal, m.AdmissionLimit, m.AdmittedSeconds,
		m.LogBatchSeconds, m.LogBatchSize,
		m.SnapshotDecisionsTotal, m.SnapshotRefreshesTotal, m.SnapshotRefreshErrorsTotal, m.SnapshotRevision, m.SnapshotTablesUnmirrored,
		m.HoldsCreatedTotal, m.HoldsResolvedTotal, m.HoldsPending, m.OldestPendingHoldSeconds,
		m.TimeToResolveSeconds, m.WebhookFailuresTotal, m.WebhookLagSeconds,
		m.ExportBatchesTotal, m.ExportDecisionsTotal, m.ExportLagSeconds,
		m.ConformanceRefusalsTotal, m.RunnersLive, m.LeaseExpirationsTotal, m.PushesPending,
		m.PanicsTotal, m.DatabaseSynchronousStandbys, m.DatabaseReplication,
	)
	m.Models = newModelMetrics(reg)
	return m
}

// PreInit creates every label combination at zero so rate() and the dashboard
// show a value from the first scrape instead of "no data" until the first event.
// actions are the catalog action names (the action label of decision metrics),
// holdKinds every hold kind (the catalog's approval kinds and the requested
// ones, approvals.HoldKinds): both derived from the catalog at start-up,
// never listed here.
func (m *Metrics) PreInit(actions, holdKinds []string) {
	m.holdKinds = slices.Clone(holdKinds)
	for _, a := range actions {
		for _, e := range Effects {
			m.DecisionsTotal.WithLabelValues(a, e)
		}
		for _, mode := range Modes {
			for _, w := range []string{"hold", "deny"} {
				m.ModeDecisionsTotal.WithLabelValues(a, mode, w)
			}
		}
	}
	for _, a := range actions {
		for _, e := range Effects {
			for _, k := range QueryKinds {
				m.QueriesTotal.WithLabelValues(a, e, k)
			}
		}
	}
	for _, e := range Effects {
		m.DecisionSeconds.WithLabelValues(e)
	}
	for _, o := range []string{"snapshot", "stale"} {
		m.SnapshotDecisionsTotal.WithLabelValues(o)
	}
	for _, k := range []string{"delta", "full"} {
		m.SnapshotRefreshesTotal.WithLabelValues(k)
	}
	for _, mode := range ReplicationModes {
		m.DatabaseReplication.WithLabelValues(mode)
	}
	for _, r := range []string{"shipped", "failed"} {
		m.ExportBatchesTotal.WithLabelValues(r)
	}
	for _, st := range EscalationSteps {
		m.EscalationStepsTotal.WithLabelValues(st)
	}
	for _, k := range holdKinds {
		m.HoldsCreatedTotal.WithLabelValues(k)
		m.HoldsPending.WithLabelValues(k)
		for _, ch := range ResolveChannels {
			m.TimeToResolveSeconds.WithLabelValues(k, ch)
		}
		m.ApprovalsPartialTotal.WithLabelValues(k)
		for _, o := range Outcomes {
			m.HoldsResolvedTotal.WithLabelValues(k, o)
		}
	}
}

// EscalationSteps are the steps of a hold's escalation (the label values
// of EscalationStepsTotal).
var EscalationSteps = []string{"remind", "escalate"}

// ObserveReplication sets the database gauges: synchronous standbys (-1
// unknown) and the mode, one of ReplicationModes.
func (m *Metrics) ObserveReplication(mode string, synchronous int) {
	m.DatabaseSynchronousStandbys.Set(float64(synchronous))
	for _, k := range ReplicationModes {
		v := 0.0
		if k == mode {
			v = 1
		}
		m.DatabaseReplication.WithLabelValues(k).Set(v)
	}
}

// HoldKinds are the hold kinds PreInit was given.
func (m *Metrics) HoldKinds() []string { return m.holdKinds }

// ObserveDecision counts one decision and its latency.
func (m *Metrics) ObserveDecision(action, effect string, took time.Duration) {
	m.DecisionsTotal.WithLabelValues(action, effect).Inc()
	m.DecisionSeconds.WithLabelValues(effect).Observe(took.Seconds())
}

// ObserveLogBatch records one batch of the decision pipeline.
func (m *Metrics) ObserveLogBatch(reads, rows int, took time.Duration) {
	m.LogBatchSeconds.Observe(took.Seconds())
	m.LogBatchSize.Observe(float64(reads + rows))
}

// ObserveSnapshotDecision counts a decision made from the fact snapshot.
func (m *Metrics) ObserveSnapshotDecision(outcome string) {
	m.SnapshotDecisionsTotal.WithLabelValues(outcome).Inc()
}

// ObserveSnapshotRefresh counts a catch-up of the fact snapshot.
func (m *Metrics) ObserveSnapshotRefresh(kind string, rev int64, _ time.Duration) {
	m.SnapshotRefreshesTotal.WithLabelValues(kind).Inc()
	m.SnapshotRevision.Set(float64(rev))
}

// ObserveMode counts one decision a gate's audit or warn mode let run.
func (m *Metrics) ObserveMode(action, mode, wouldEffect string) {
	m.ModeDecisionsTotal.WithLabelValues(action, mode, wouldEffect).Inc()
}

// ObserveQuery counts one dry run or read (kind) and its latency.
func (m *Metrics) ObserveQuery(action, effect, kind string, took time.Duration) {
	m.QueriesTotal.WithLabelValues(action, effect, kind).Inc()
	m.DecisionSeconds.WithLabelValues(effect).Observe(took.Seconds())
}

// RegisterBuildInfo exports clawguard_build_info{version, goversion} = 1, so
// dashboards can show (and alerts compare) what each replica runs.
func RegisterBuildInfo(reg prometheus.Registerer, version string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "clawguard", Name: "build_info",
		Help: "Always 1; the labels say which build this process runs.",
	}, []string{"version", "goversion"})
	reg.MustRegister(g)
	g.WithLabelValues(version, runtime.Version()).Set(1)
}

// ResolveChannels are the channel label's usual values, pre-created so the
// dashboard's series exist before the first click; a bridge's own channel
// namespace appears when it first resolves one.
var ResolveChannels = []string{"console", "telegram", "slack", "ncl", "operator", "expiry"}

// ObserveResolved counts one resolved hold and how long it waited before
// the channel it was resolved from answered.
func (m *Metrics) ObserveResolved(kind, outcome, channel string, waited time.Duration) {
	m.HoldsResolvedTotal.WithLabelValues(kind, outcome).Inc()
	m.TimeToResolveSeconds.WithLabelValues(kind, channel).Observe(waited.Seconds())
}

// NewRegistry returns a registry with the Go runtime and process collectors,
// ready for NewMetrics and NewGRPCServerMetrics.
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
