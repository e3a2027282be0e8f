package approvals

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// EventsChannel is the NOTIFY channel hold_events' trigger signals. A
// notification is only a wake-up: readers always re-read the table after
// their last cursor, so nothing is missed or duplicated.
const EventsChannel = "clawguard_hold_events"

// readSettled runs read in a transaction that first takes the event lock
// exclusive (see eventLockKey): it waits until no writer that drew a
// cursor is still in flight and keeps new ones out, so each statement of
// read (READ COMMITTED: a snapshot per statement, taken after the lock)
// sees every cursor below the newest it sees. Held for read's statements
// only; writers queue behind it and then commit in parallel again.
func readSettled(ctx context.Context, pool *pgxpool.Pool, read func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, eventLockKey); err != nil {
			return fmt.Errorf("wait for hold event writers: %w", err)
		}
		return read(tx)
	})
}

// readEvents reads up to limit events after cursor, oldest first. Only
// under readSettled: a plain read may see a cursor committed before a
// smaller one.
func readEvents(ctx context.Context, q store.Querier, after int64, limit int) ([]*guardv1.WatchResponse, error) {
	rows, err := q.Query(ctx, `SELECT cursor, type, COALESCE(outcome, ''), resolver, undelivered, hold, created_at, approvals_remaining
		FROM hold_events WHERE cursor > $1 ORDER BY cursor LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read hold events: %w", err)
	}
	defer rows.Close()
	var out []*guardv1.WatchResponse
	for rows.Next() {
		var (
			ev           guardv1.WatchResponse
			typ, outcome string
			body         []byte
			at           time.Time
		)
		if err := rows.Scan(&ev.Cursor, &typ, &outcome, &ev.Resolver, &ev.Undelivered, &body, &at, &ev.ApprovalsRemaining); err != nil {
			return nil, fmt.Errorf("read hold events: %w", err)
		}
		ev.Hold = &guardv1.Hold{}
		if err := protojson.Unmarshal(body, ev.Hold); err != nil {
			return nil, fmt.Errorf("hold event %d: %w", ev.Cursor, err)
		}
		var err error
		if ev.Type, err = enumword.Parse[guardv1.EventType](typ); err != nil || ev.Type == 0 {
			return nil, fmt.Errorf("hold event %d: type %q: %v", ev.Cursor, typ, err)
		}
		if ev.Outcome, err = enumword.Parse[guardv1.Outcome](outcome); err != nil {
			return nil, fmt.Errorf("hold event %d: %w", ev.Cursor, err)
		}
		ev.At = timestamppb.New(at)
		out = append(out, &ev)
	}
	return out, rows.Err()
}

// LatestCursor is the newest event's cursor (0 when none), settled: no
// smaller cursor can still commit after it.
func LatestCursor(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var c int64
	err := readSettled(ctx, pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT COALESCE(max(cursor), 0) FROM hold_events`).Scan(&c)
	})
	if err != nil {
		return 0, fmt.Errorf("latest hold event: %w", err)
	}
	return c, nil
}
