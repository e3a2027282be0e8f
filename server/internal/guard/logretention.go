package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clawguard/clawguard/server/internal/store"
)

// The decision log is partitioned by UTC day on `at` (migration 0160).
// Every replica runs the maintenance, one at a time (an advisory lock);
// the work is idempotent, so the next one finds nothing left to do.
const (
	// PartitionsAhead is how many days past today always have a partition,
	// so a few days of a stopped loop never send rows to the default one.
	PartitionsAhead = 3
	// partitionLockKey serialises partition maintenance across replicas.
	partitionLockKey int64 = 0x636c6177706172 // "clawpar"
	// partitionLockTimeout bounds how long creating or dropping a partition
	// waits for the parent's lock: decisions queue behind that request, so
	// it gives up quickly and retries next round.
	partitionLockTimeout = "200ms"
)

// Day is the UTC day containing t.
func Day(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

// EnsureDecisionPartitions creates the partitions of today through
// PartitionsAhead days later that are missing; it returns how many it made.
func EnsureDecisionPartitions(ctx context.Context, db store.DB, now time.Time) (int, error) {
	var made int
	err := underPartitionLock(ctx, db, func(tx pgx.Tx) error {
		today := Day(now)
		return tx.QueryRow(ctx, `SELECT decisions_ensure_partitions($1::date, $2::date)`,
			today, today.AddDate(0, 0, PartitionsAhead)).Scan(&made)
	})
	if err != nil {
		return 0, fmt.Errorf("create decision partitions: %w", err)
	}
	return made, nil
}

// DropDecisionPartitions drops every daily partition whose whole day is
// before cutoff, and the partition of rows older than the days 0160 gave
// partitions (decisions_before_DAY) once DAY is; it returns the names it
// dropped.
func DropDecisionPartitions(ctx context.Context, db store.DB, cutoff time.Time) ([]string, error) {
	var dropped []string
	err := underPartitionLock(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'decisions'::regclass AND c.relname ~ '^decisions_(before_)?[0-9]{8}$'
			  AND to_date(right(c.relname, 8), 'YYYYMMDD') + CASE WHEN c.relname LIKE 'decisions\_before\_%' THEN 0 ELSE 1 END
			      <= ($1::timestamptz AT TIME ZONE 'UTC')::date
			ORDER BY c.relname`, cutoff)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range names {
			if _, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{name}.Sanitize()); err != nil {
				return fmt.Errorf("drop %s: %w", name, err)
			}
		}
		dropped = names
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drop decision partitions: %w", err)
	}
	return dropped, nil
}

// underPartitionLock runs fn in a transaction holding the maintenance
// lock, with a short lock timeout for its DDL; a timed-out attempt is
// retried a few times after a pause (a busy table frees up in moments).
func underPartitionLock(ctx context.Context, db store.DB, fn func(pgx.Tx) error) error {
	var err error
	for attempt := range lockAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		err = partitionTx(ctx, db, fn)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != lockNotAvailable {
			return err
		}
	}
	return err
}

// lockNotAvailable is SQLSTATE 55P03, what lock_timeout raises.
const lockNotAvailable = "55P03"

// lockAttempts bounds underPartitionLock's tries per round.
const lockAttempts = 5

func partitionTx(ctx context.Context, db store.DB, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, partitionLockKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+partitionLockTimeout+`'`); err != nil {
			return err
		}
		return fn(tx)
	})
}

// PruneDecisions deletes up to batch decisions made before cutoff from the
// default partition, oldest first: daily partitions are dropped whole, so
// only rows that found no partition of their day are deleted row by row.
func PruneDecisions(ctx context.Context, db store.Querier, before time.Time, batch int) (int64, error) {
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
func PruneDecisionRequests(ctx context.Context, db store.Querier, before time.Time, batch int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM decision_requests WHERE (runner_id, request_id) IN (
		SELECT runner_id, request_id FROM decision_requests WHERE at < $1 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, batch)
	if err != nil {
		return 0, fmt.Errorf("prune decision request ids: %w", err)
	}
	return tag.RowsAffected(), nil
}
