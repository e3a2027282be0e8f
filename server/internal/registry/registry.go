// Package registry is the runner side of the control plane: registration
// with conformance, leases and session reassignment, the Connect stream of
// durable pushes, session opening, and decision citations (ApplyAction).
// Refusals are returned as gRPC status errors; database failures as wrapped
// errors the api layer maps.
//
// The runner's protocol:
//
//  1. RegisterRunner{runner_id (= the token's), instance_id (random per
//     process), host, labels, capabilities, delivery_actions}. Any
//     conformance violation → FailedPrecondition with a ConformanceViolations
//     detail (print them, exit 1). AlreadyExists → another live process holds
//     the id; retry after the lease TTL. The answer carries the lease expiry
//     and the heartbeat interval.
//  2. Connect: first frame hello{runner_id, instance_id}. The server then
//     sends every unacked push of the runner, oldest first, and new ones as
//     they are stored (any replica). Send heartbeat every heartbeat_interval
//     (answered by LeaseRenewed); ack{push_id, ok} each push once applied.
//     ack{ok: false, error} keeps it pending: sent again (at most
//     MaxPushAttempts times). A push may arrive more than once: apply by id. A push
//     for a session the runner has not seen means it now hosts it.
//     FailedPrecondition on hello or a heartbeat = the lease is lost:
//     register again, then reconnect.
//  3. OpenSession{agent_group_id} opens (or returns) a group's session on
//     the runner; ApplyAction{decision_id, session_id, action, payload,
//     resource} performs a mutation citing the guard's ALLOW (single use,
//     fresh, same session and action).
//
// Where: runner registration (identity checked against the token) and
// conformance (runners.go); leases, session placement and reassignment; the
// Connect stream (stream.go, woken through PushWakeups, the listener's
// handler of PushChannel; a rescan every 5 s is the safety net); decision
// citations and ApplyAction (actions.go: session ownership, the citation,
// binding the payload to the decision, the live re-check, marking applied),
// which runs the domain's Applier for the action (applier.go: the apply
// step, plus what binding needs to know — the decided resource,
// runner-stamped payload keys, always-held actions); it applies exactly the
// actions it was handed steps for (AppliedActions). An approved hold's
// replay is one call (replay.go: ApplyAction{grant} — the guard decides it
// in the applying transaction, guard.Engine.DecideTx, and the applier runs
// on the payload the hold stores); the re-check of a cited ALLOW reads the
// freeze facts with the calling runner.
package registry

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

// Options are the registry's timings.
type Options struct {
	// Baseline is the guard's live baseline check (guard.Engine.Baseline),
	// re-run on what ApplyAction is about to apply, for an agent of the
	// calling runner; nil: ApplyAction fails closed.
	Baseline func(ctx context.Context, q guard.Querier, in guard.Input, runnerID string) (guard.Decision, error)
	// DecideTx is the guard deciding in ApplyAction's transaction
	// (guard.Engine.DecideTx): an approved hold's replay is decided and
	// applied at once. Nil: such a replay fails closed.
	DecideTx DecideTx
	// LeaseTTL is how long a lease lasts without a heartbeat.
	LeaseTTL time.Duration
	// CitationWindow is how old a cited ALLOW decision may be.
	CitationWindow time.Duration
	// HeartbeatInterval is what runners are told to use (default LeaseTTL/3).
	HeartbeatInterval time.Duration
	// SweepInterval is how often expired leases are looked for (default
	// LeaseTTL/3, at most 2s).
	SweepInterval time.Duration
	// RescanInterval re-reads every stream's pending pushes even without a
	// NOTIFY (the safety net; default 5s).
	RescanInterval time.Duration
	// AckDeadline is how long a push sent on a live stream may stay
	// unacknowledged before it is sent again on that stream (default 30s).
	AckDeadline time.Duration
	// Appliers are the apply steps of the actions ApplyAction performs,
	// each from the domain that registers the action's catalog entry.
	Appliers []Applier
	// PushWindow bounds the pushes in flight (sent, unacknowledged, not yet
	// due again) on one stream: flow control, so a burst never outruns the
	// runner (default 256).
	PushWindow int
}

func (o Options) withDefaults() Options {
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = o.LeaseTTL / 3
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = min(o.LeaseTTL/3, 2*time.Second)
	}
	if o.SweepInterval < 50*time.Millisecond {
		o.SweepInterval = 50 * time.Millisecond
	}
	if o.RescanInterval <= 0 {
		o.RescanInterval = 5 * time.Second
	}
	if o.AckDeadline <= 0 {
		o.AckDeadline = 30 * time.Second
	}
	if o.PushWindow <= 0 {
		o.PushWindow = 256
	}
	return o
}

// Service is the registry of one replica.
type Service struct {
	pool    *pgxpool.Pool
	metrics *metrics.Metrics
	log     *slog.Logger
	opts    Options
	catalog Catalog
	hub     *hub
	// baseline re-checks what ApplyAction is about to apply (D3 at apply).
	baseline func(ctx context.Context, q guard.Querier, in guard.Input, runnerID string) (guard.Decision, error)
	decideTx DecideTx
	// appliers are the domains' apply steps by action (Options.Appliers).
	appliers map[string]Applier
}

// New builds the registry. catalog is the guard catalog conformance checks
// against; every apply step must be for one of its actions.
func New(pool *pgxpool.Pool, m *metrics.Metrics, log *slog.Logger, opts Options, catalog Catalog) (*Service, error) {
	byAction, err := appliers(opts.Appliers, catalog)
	if err != nil {
		return nil, fmt.Errorf("refusing to start: %w", err)
	}
	return &Service{pool: pool, metrics: m, log: log, opts: opts.withDefaults(), catalog: catalog, hub: newHub(),
		baseline: opts.Baseline, decideTx: opts.DecideTx, appliers: byAction}, nil
}

// SetRescanInterval changes the pending-push rescan (the safety net under
// NOTIFY) of streams connected after the call; tests lengthen it to prove
// the NOTIFY path.
func (s *Service) SetRescanInterval(d time.Duration) { s.opts.RescanInterval = d }

// Catalog is the catalog registrations are checked against (the CI walk uses it).
func (s *Service) Catalog() Catalog { return s.catalog }
