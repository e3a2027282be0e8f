// Package retention deletes what a long-running fleet no longer needs: old
// decision log rows, old hold lifecycle events and old chat outbox messages. Every replica runs the
// loop; batches lock their rows with SKIP LOCKED, so replicas share the work
// instead of queueing behind each other.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what pruning needs (a pool or a transaction).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CitationFactor: decisions are kept at least this many citation windows,
// so a decision a runner may still cite is never deleted.
const CitationFactor = 10

// Defaults for the loop.
const (
	DefaultBatch    = 5000
	DefaultInterval = time.Minute
)

// FactChangesKept is how long fact_changes keeps what each fact revision
// changed: a replica whose snapshot is older than that reloads it whole
// instead of catching up (package snapshot).
const FactChangesKept = time.Hour

// Pruner is the background loop. A zero retention keeps that table forever.
type Pruner struct {
	DB                DB
	Log               *slog.Logger
	DecisionRetention time.Duration
	EventRetention    time.Duration
	CitationWindow    time.Duration
	Batch             int
	Interval          time.Duration
	// Exported, when set (decision export is configured), is the time
	// through which the log has been shipped: nothing younger is dropped.
	Exported func(context.Context) (time.Time, error)
}

// Run prunes now and then every Interval until ctx ends (it also keeps the
// decision log's partitions made ahead, retention or not). Failures are
// logged and retried next round: retention is never worth stopping for.
func (p *Pruner) Run(ctx context.Context) error {
	t := time.NewTicker(p.interval())
	defer t.Stop()
	for {
		if err := p.PruneOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			p.Log.Warn("retention: pruning failed; retrying next round", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// PruneOnce makes the decision log's partitions ahead, then drops or
// deletes everything past retention as of now.
func (p *Pruner) PruneOnce(ctx context.Context, now time.Time) error {
	made, err := EnsureDecisionPartitions(ctx, p.DB, now)
	if made > 0 {
		p.Log.Info("retention: created decision partitions", "count", made)
	}
	if err != nil {
		return err
	}
	if n, err := drain(ctx, p.batch(), func(b int) (int64, error) {
		return PruneFactChanges(ctx, p.DB, now.Add(-FactChangesKept), b)
	}); err != nil {
		return err
	} else if n > 0 {
		p.Log.Debug("retention: pruned fact changes", "revisions", n, "older_than", FactChangesKept)
	}
	if p.DecisionRetention > 0 {
		cutoff := now.Add(-p.decisionKeep())
		if p.Exported != nil {
			through, err := p.Exported(ctx)
			if err != nil {
				return err
			}
			if through.Before(cutoff) {
				cutoff = through
			}
		}
		dropped, err := DropDecisionPartitions(ctx, p.DB, cutoff)
		if len(dropped) > 0 {
			p.Log.Info("retention: dropped decision partitions", "partitions", dropped, "older_than", p.decisionKeep())
		}
		if err != nil {
			return err
		}
		n, err := drain(ctx, p.batch(), func(b int) (int64, error) {
			return PruneDecisions(ctx, p.DB, cutoff, b)
		})
		if n > 0 {
			p.Log.Info("retention: pruned decisions from the default partition", "rows", n, "older_than", p.decisionKeep())
		}
		if err != nil {
			return err
		}
		n, err = drain(ctx, p.batch(), func(b int) (int64, error) {
			return PruneDecisionRequests(ctx, p.DB, cutoff, b)
		})
		if n > 0 {
			p.Log.Info("retention: pruned decision request ids", "rows", n, "older_than", p.decisionKeep())
		}
		if err != nil {
			return err
		}
	}
	if p.EventRetention > 0 {
		n, err := drain(ctx, p.batch(), func(b int) (int64, error) {
			return PruneHoldEvents(ctx, p.DB, now.Add(-p.EventRetention), b)
		})
		if n > 0 {
			p.Log.Info("retention: pruned hold events", "rows", n, "older_than", p.EventRetention)
		}
		if err != nil {
			return err
		}
		n, err = drain(ctx, p.batch(), func(b int) (int64, error) {
			return PruneChatOutbox(ctx, p.DB, now.Add(-p.EventRetention), b)
		})
		if n > 0 {
			p.Log.Info("retention: pruned chat outbox messages", "rows", n, "older_than", p.EventRetention)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PruneFactChanges deletes the changes of up to batch of the oldest fact
// revisions recorded before cutoff, whole revisions only and oldest first:
// a snapshot catching up treats the oldest revision it finds as complete,
// so a revision must never be left half deleted, nor one deleted while an
// older one stays. It reports the revisions deleted.
func PruneFactChanges(ctx context.Context, db DB, before time.Time, batch int) (int64, error) {
	var n int64
	// (least ignores a NULL: with nothing old, old is NULL and so is the cut.)
	err := db.QueryRow(ctx, `WITH bounds AS (
			SELECT (SELECT max(rev) FROM fact_changes WHERE at < $1) AS old, (SELECT min(rev) FROM fact_changes) AS first),
		cut AS (SELECT CASE WHEN old IS NOT NULL THEN least(old, first + $2 - 1) END AS rev FROM bounds),
		gone AS (DELETE FROM fact_changes WHERE rev <= (SELECT rev FROM cut) RETURNING rev)
		SELECT count(DISTINCT rev) FROM gone`, before, batch).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("prune fact changes: %w", err)
	}
	return n, nil
}

// PruneChatOutbox deletes up to batch chat outbox messages queued before
// cutoff (the event retention: a bridge down for longer misses them).
func PruneChatOutbox(ctx context.Context, db DB, before time.Time, batch int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM chat_outbox WHERE cursor IN (
		SELECT cursor FROM chat_outbox WHERE created_at < $1 ORDER BY cursor LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, batch)
	if err != nil {
		return 0, fmt.Errorf("prune chat outbox: %w", err)
	}
	return tag.RowsAffected(), nil
}

// decisionKeep is the retention, never less than CitationFactor citation
// windows (config validation refuses less; this is the backstop).
func (p *Pruner) decisionKeep() time.Duration {
	return max(p.DecisionRetention, CitationFactor*p.CitationWindow)
}

func (p *Pruner) batch() int {
	if p.Batch > 0 {
		return p.Batch
	}
	return DefaultBatch
}

func (p *Pruner) interval() time.Duration {
	if p.Interval > 0 {
		return p.Interval
	}
	return DefaultInterval
}

// drain runs one batch after another until a batch comes back short.
func drain(ctx context.Context, batch int, once func(int) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := once(batch)
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(batch) || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// PruneDecisions deletes up to batch decisions made before cutoff from the
// default partition, oldest first: daily partitions are dropped whole, so
// only rows that found no partition of their day are deleted row by row.
func PruneDecisions(ctx context.Context, db DB, before time.Time, batch int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM decisions_default WHERE (id, at) IN (
		SELECT id, at FROM decisions_default WHERE at < $1 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, batch)
	if err != nil {
		return 0, fmt.Errorf("prune decisions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// PruneDecisionRequests deletes up to batch idempotency keys of decisions
// made before cutoff (their decisions are gone: a retry that late is a new
// decision).
func PruneDecisionRequests(ctx context.Context, db DB, before time.Time, batch int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM decision_requests WHERE (runner_id, request_id) IN (
		SELECT runner_id, request_id FROM decision_requests WHERE at < $1 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, batch)
	if err != nil {
		return 0, fmt.Errorf("prune decision request ids: %w", err)
	}
	return tag.RowsAffected(), nil
}

// PruneHoldEvents deletes up to batch hold events created before cutoff,
// except those of holds still pending (their "requested" event is how a
// watcher learns of them). The same statement raises the pruned-through
// watermark, so a Watch can tell a pruned cursor from a quiet one.
func PruneHoldEvents(ctx context.Context, db DB, before time.Time, batch int) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `WITH victims AS (
			SELECT e.cursor FROM hold_events e
			WHERE e.created_at < $1
			  AND NOT EXISTS (SELECT 1 FROM holds h WHERE h.id = e.hold_id AND h.status = 'pending')
			ORDER BY e.created_at LIMIT $2
			FOR UPDATE OF e SKIP LOCKED
		), gone AS (
			DELETE FROM hold_events e USING victims v WHERE e.cursor = v.cursor RETURNING e.cursor
		), mark AS (
			UPDATE hold_events_pruned SET through = GREATEST(through, (SELECT max(cursor) FROM gone))
			WHERE EXISTS (SELECT 1 FROM gone)
		)
		SELECT count(*) FROM gone`, before, batch).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("prune hold events: %w", err)
	}
	return n, nil
}

// PrunedThrough is the highest hold event cursor ever pruned (0: none).
func PrunedThrough(ctx context.Context, db DB) (int64, error) {
	var c int64
	if err := db.QueryRow(ctx, `SELECT through FROM hold_events_pruned`).Scan(&c); err != nil {
		return 0, fmt.Errorf("hold events pruned watermark: %w", err)
	}
	return c, nil
}

// CursorPruned is the OutOfRange answer to resuming after a pruned cursor.
func CursorPruned(after, through int64) error {
	return fault.New(fault.OutOfRange,
		"cursor %d was pruned; the oldest retained is %d — resume from %d or from_now", after, through, through)
}
