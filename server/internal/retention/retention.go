// Package retention is the loop that deletes what a long-running fleet no
// longer needs — old decision log rows (by whole day partitions), old hold
// lifecycle events, old chat outbox messages, old fact changes — through
// the package that owns each table (guard, approvals, chatout, snapshot):
// it decides when and how much, they hold the SQL. Every replica runs the
// loop; batches lock their rows with SKIP LOCKED, so replicas share the
// work instead of queueing behind each other.
//
// The decision log is partitioned by UTC day on at (0160); one replica at a
// time (advisory lock) makes today's and the next 3 days' partitions and
// drops whole days older than --decision-retention (never past the export
// watermark when --decision-export-url is set; at least 10 citation windows;
// a row lives up to a day longer). Rows older than the 31 days 0160
// partitioned share decisions_before_DAY, dropped whole past DAY; rows in
// the DEFAULT partition (a day the loop never made) and the idempotency keys
// (decision_requests, outside the log because a partitioned unique index
// must include at) are deleted in batches (SKIP LOCKED); hold events older
// than --event-retention except a pending hold's; fact_changes older than an
// hour, whole revisions only, oldest first; hold_events_pruned.through makes
// Watch answer OutOfRange for a pruned cursor.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/chatout"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/snapshot"
	"github.com/clawguard/clawguard/server/internal/store"
)

// DB is what pruning needs: a pool (its steps run their own transactions).
type DB = store.DB

// CitationFactor: decisions are kept at least this many citation windows,
// so a decision a runner may still cite is never deleted.
const CitationFactor = 10

// Defaults for the loop.
const (
	DefaultBatch    = 5000
	DefaultInterval = time.Minute
)

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
	made, err := guard.EnsureDecisionPartitions(ctx, p.DB, now)
	if made > 0 {
		p.Log.Info("retention: created decision partitions", "count", made)
	}
	if err != nil {
		return err
	}
	if n, err := drain(ctx, p.batch(), func(b int) (int64, error) {
		return snapshot.PruneFactChanges(ctx, p.DB, now.Add(-snapshot.FactChangesKept), b)
	}); err != nil {
		return err
	} else if n > 0 {
		p.Log.Debug("retention: pruned fact changes", "revisions", n, "older_than", snapshot.FactChangesKept)
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
		dropped, err := guard.DropDecisionPartitions(ctx, p.DB, cutoff)
		if len(dropped) > 0 {
			p.Log.Info("retention: dropped decision partitions", "partitions", dropped, "older_than", p.decisionKeep())
		}
		if err != nil {
			return err
		}
		n, err := drain(ctx, p.batch(), func(b int) (int64, error) {
			return guard.PruneDecisions(ctx, p.DB, cutoff, b)
		})
		if n > 0 {
			p.Log.Info("retention: pruned decisions from the default partition", "rows", n, "older_than", p.decisionKeep())
		}
		if err != nil {
			return err
		}
		n, err = drain(ctx, p.batch(), func(b int) (int64, error) {
			return guard.PruneDecisionRequests(ctx, p.DB, cutoff, b)
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
			return approvals.PruneHoldEvents(ctx, p.DB, now.Add(-p.EventRetention), b)
		})
		if n > 0 {
			p.Log.Info("retention: pruned hold events", "rows", n, "older_than", p.EventRetention)
		}
		if err != nil {
			return err
		}
		n, err = drain(ctx, p.batch(), func(b int) (int64, error) {
			return chatout.PruneChatOutbox(ctx, p.DB, now.Add(-p.EventRetention), b)
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
