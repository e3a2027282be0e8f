// Package metering is the server's side of the model gateway (issue 44):
// where a runner reads a session's provider route (with its credential,
// for the runner alone), reserves a call's worst case against its group's
// budget before forwarding it, and settles the reservation to what the
// provider reported after. It owns model_spend (the budget's counters),
// model_reservations and model_usage.
//
// A reservation cites the call's model.call ALLOW (one reservation per
// decision) and is one conditional UPDATE of the counter of the group's
// budget period — spent + reserved + this ≤ budget — so any number of
// racing calls never overshoot. Past the budget it is refused; the runner
// then asks the guard model.budget, and an ALLOW of it (same session,
// unused) lets the call reserve past the budget. A settle moves the
// reservation from reserved to spent and adds the usage, exactly once (a
// conditional UPDATE of the reservation). A reservation nobody settled
// within an hour is settled to its worst case by a sweep on every replica.
//
// Counters: spent is always the sum of model_usage over the period. A
// group without a budget has none; a counter is made from model_usage by
// the first reservation of its period, under the group's advisory lock,
// which every settle takes shared, so no settle is counted twice or missed.
//
// It owns model_spend, model_reservations and model_usage: the runner's
// route (GetModelRoute: the group's provider of a kind with its credential,
// to the runner the session is placed on alone), reservations
// (ReserveModelUsage: the reads in one batch, then one statement that
// reserves on the budget period's counter when the call fits and records the
// reservation, committed asynchronously), settlements once
// (SettleModelUsage; a call never reserved is recorded from its decision),
// the sweep of unsettled reservations; BudgetState and PeriodUsage for the
// reads.
package metering

import (
	"context"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/server/internal/metrics"
)

// SweepAge is how old an unsettled reservation is when the sweep settles it
// to its worst case (its runner died, or never reached the server again).
const SweepAge = time.Hour

// Options are the service's settings.
type Options struct {
	// CitationWindow is how old a cited decision may be (the registry's).
	CitationWindow time.Duration
	Metrics        *metrics.ModelMetrics // nil: none
	Log            *slog.Logger
}

// Service serves the runners' model RPCs.
type Service struct {
	pool *pgxpool.Pool
	opts Options
}

// New builds the service.
func New(pool *pgxpool.Pool, o Options) *Service {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.CitationWindow <= 0 {
		o.CitationWindow = 2 * time.Minute
	}
	return &Service{pool: pool, opts: o}
}

// reserveTx is a reservation's transaction: committed without waiting for
// the WAL flush (a crash loses at most reservations, which their settles
// make again), statements planned generically (every one reads by key).
var reserveTx = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off; SET LOCAL plan_cache_mode = force_generic_plan"}

// groupLock is the advisory lock key of a group's counters: exclusive while
// one is made from model_usage, shared by every settle.
func groupLock(group string) int64 {
	h := fnv.New64a()
	h.Write([]byte("model_spend:" + group))
	return int64(h.Sum64())
}

// lockShared takes the group's counter lock shared, for the transaction.
func lockShared(ctx context.Context, tx pgx.Tx, group string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, groupLock(group))
	return err
}
