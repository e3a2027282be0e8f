package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/wake"
)

// EventsChannel is the NOTIFY channel hold_events' trigger signals. A
// notification is only a wake-up: readers always re-read the table after
// their last cursor, so nothing is missed or duplicated.
const EventsChannel = wake.HoldEventsChannel

// Cursors are drawn from a sequence when an event is inserted, so they can
// commit out of order: a writer that drew cursor N may commit after one
// that drew N+1. A reader that passed N+1 must never see N appear later
// (the table is the truth for Watch; an approval skipped there is lost to
// every subscriber, the webhook and the bridges). Writers take no lock for
// it. A reader that finds a gap — a missing cursor below one it sees —
// fills it with a "skipped" tombstone (INSERT … ON CONFLICT DO NOTHING on
// the cursor): if the writer's row is in flight, the insert waits for that
// writer alone and then yields to its committed row, or takes its place if
// the writer rolled back; a writer that has drawn the cursor but not yet
// inserted finds the tombstone: its insert fails on the cursor alone and
// insertEvent makes it again, with a fresh cursor, from a savepoint, so
// nothing else of the writer's transaction is undone. Either way the
// gap is settled before the reader passes it. Gaps are rare (a rolled-back
// writer, sequence values lost in a crash, a writer caught between its
// draw and its commit), so readers almost never write, and never wait for
// writers they do not depend on.

// skipped is the event type of a gap's tombstone; readers pass it by.
const skipped = "skipped"

// The writers: every event is written in the transaction that makes its
// change, as that transaction's last statement.

// insertPartialEventTx appends an approved_partial event (one per approval
// short of a quorum; the hold_approvals key makes each user's count once).
func insertPartialEventTx(ctx context.Context, tx pgx.Tx, h *guardv1.Hold, approver string, remaining int) error {
	body, err := protojson.Marshal(h)
	if err != nil {
		return fmt.Errorf("hold event: encode hold: %w", err)
	}
	err = insertEvent(ctx, tx, `INSERT INTO hold_events (hold_id, type, resolver, approvals_remaining, hold)
		SELECT $2, 'approved_partial', $3, $4, $5 FROM (SELECT pg_advisory_xact_lock_shared($1)) AS compat`,
		previousReleaseEventLock, h.Id, approver, remaining, body)
	if err != nil {
		return fmt.Errorf("hold event approved_partial %s: %w", h.Id, err)
	}
	return nil
}

// insertEventTx appends a lifecycle event in tx (exactly once: hold_events
// is UNIQUE(hold_id, type), so a second one fails the transaction rather
// than publishing twice). Its cursor is in flight until the transaction
// commits and readers wait at it, so it is the transaction's last statement.
// Statements in before (the transaction's other last writes) go out in the
// same round trip, ahead of the event.
func insertEventTx(ctx context.Context, tx pgx.Tx, h *guardv1.Hold, typ, outcome, resolver string, undelivered bool, before ...*pgx.QueuedQuery) error {
	body, err := protojson.Marshal(h)
	if err != nil {
		return fmt.Errorf("hold event: encode hold: %w", err)
	}
	err = insertEventAfter(ctx, tx, before, `INSERT INTO hold_events (hold_id, type, outcome, resolver, undelivered, hold)
		SELECT $2, $3, NULLIF($4, ''), $5, $6, $7 FROM (SELECT pg_advisory_xact_lock_shared($1)) AS compat`,
		previousReleaseEventLock, h.Id, typ, outcome, resolver, undelivered, body)
	if err != nil {
		return fmt.Errorf("hold event %s %s: %w", typ, h.Id, err)
	}
	return nil
}

// previousReleaseEventLock is the advisory lock the previous release's
// event readers take exclusive before reading, its writers shared to
// commit. Writers still take it shared, so a replica of the previous
// release still running during a rolling upgrade never reads past a cursor
// in flight; this release's readers never take it, so it orders nothing
// between this release's writers (shared never waits for shared). Drop it
// once no replica of the previous release can be running.
const previousReleaseEventLock int64 = 0x636c_6177_6576_7473 // "clawevts"

// insertEvent runs one hold_events INSERT in tx. A reader may have settled
// the cursor the insert drew, tombstoning it while the insert was between
// drawing the cursor and writing its row (see readEvents): the insert then
// fails on the cursor alone, and is made again, with a fresh cursor, from a
// savepoint taken in the same round trip. Nothing else of tx is undone.
func insertEvent(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	return insertEventAfter(ctx, tx, nil, sql, args...)
}

// insertEventAfter is insertEvent with the statements in before sent in the
// same round trip, ahead of the savepoint (their callbacks, if any, read
// their results; an error of one fails the event): a retry of the event
// keeps them.
func insertEventAfter(ctx context.Context, tx pgx.Tx, before []*pgx.QueuedQuery, sql string, args ...any) error {
	for attempt := 1; ; attempt++ {
		b := &pgx.Batch{}
		if attempt == 1 {
			b.QueuedQueries = append(b.QueuedQueries, before...)
		}
		b.Queue(`SAVEPOINT hold_event`)
		b.Queue(sql, args...)
		err := tx.SendBatch(ctx, b).Close()
		var pgErr *pgconn.PgError
		if err == nil {
			wake.HoldEvents(ctx) // a transaction begun with wake.KeyedTx notifies after commit
			return nil
		}
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "hold_events_pkey" || attempt == 5 {
			return err
		}
		if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT hold_event`); err != nil {
			return err
		}
	}
}

// The readers.

// readEvents reads up to limit events after cursor, oldest first, with
// every gap below the last one settled; through is the cursor the read
// reached (tombstones included, so a caller moves past them).
func readEvents(ctx context.Context, pool *pgxpool.Pool, after int64, limit int) (evs []*guardv1.WatchResponse, through int64, err error) {
	rows, err := readEventRows(ctx, pool, `cursor > $1 ORDER BY cursor LIMIT $2`, after, limit)
	if err != nil {
		return nil, after, err
	}
	next := after + 1
	for _, r := range rows {
		if r.cursor > next {
			// A gap: settle it, then take what committed into it.
			filled, err := fillGap(ctx, pool, next, r.cursor)
			if err != nil {
				return nil, after, err
			}
			evs = append(evs, filled...)
		}
		if r.ev != nil {
			evs = append(evs, r.ev)
		}
		next = r.cursor + 1
	}
	return evs, next - 1, nil
}

// fillGap settles cursors [from, to): it tombstones those with no row
// (waiting for any writer holding one) and returns the events that
// committed there, in order.
func fillGap(ctx context.Context, pool *pgxpool.Pool, from, to int64) ([]*guardv1.WatchResponse, error) {
	if _, err := pool.Exec(ctx, `INSERT INTO hold_events (cursor, hold_id, type, hold)
		SELECT g, '', '`+skipped+`', '{}' FROM generate_series($1::bigint, $2::bigint - 1) AS g
		ON CONFLICT (cursor) DO NOTHING`, from, to); err != nil {
		return nil, fmt.Errorf("settle hold events %d–%d: %w", from, to-1, err)
	}
	rows, err := readEventRows(ctx, pool, `cursor >= $1 AND cursor < $2 ORDER BY cursor`, from, to)
	if err != nil {
		return nil, err
	}
	var out []*guardv1.WatchResponse
	for _, r := range rows {
		if r.ev != nil {
			out = append(out, r.ev)
		}
	}
	return out, nil
}

// eventRow is one row: its cursor, and its event (nil for a tombstone).
type eventRow struct {
	cursor int64
	ev     *guardv1.WatchResponse
}

func readEventRows(ctx context.Context, q store.Querier, where string, args ...any) ([]eventRow, error) {
	rows, err := q.Query(ctx, `SELECT cursor, type, COALESCE(outcome, ''), resolver, undelivered, hold, created_at, approvals_remaining
		FROM hold_events WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read hold events: %w", err)
	}
	defer rows.Close()
	var out []eventRow
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
		if typ == skipped {
			out = append(out, eventRow{cursor: ev.Cursor})
			continue
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
		out = append(out, eventRow{cursor: ev.Cursor, ev: &ev})
	}
	return out, rows.Err()
}

// settleWindow is how far below the newest cursor LatestCursor settles
// gaps: a writer holding a cursor further back would have been committing
// while that many later events committed.
const settleWindow = 100_000

// LatestCursor is the newest event's cursor (0 when none), settled: every
// gap in the last settleWindow cursors below it is filled first (waiting
// for writers still committing into them), so no smaller cursor can commit
// after it.
func LatestCursor(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var latest int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(cursor), 0) FROM hold_events`).Scan(&latest); err != nil {
		return 0, fmt.Errorf("latest hold event: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT prev + 1, cursor FROM (
			SELECT cursor, lag(cursor) OVER (ORDER BY cursor) AS prev FROM hold_events
			WHERE cursor > GREATEST($1::bigint - $2, (SELECT through FROM hold_events_pruned))) AS c
		WHERE cursor > prev + 1`, latest, settleWindow)
	if err != nil {
		return 0, fmt.Errorf("latest hold event: gaps: %w", err)
	}
	gaps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (g [2]int64, err error) {
		return g, r.Scan(&g[0], &g[1])
	})
	if err != nil {
		return 0, fmt.Errorf("latest hold event: gaps: %w", err)
	}
	for _, g := range gaps {
		if _, err := fillGap(ctx, pool, g[0], g[1]); err != nil {
			return 0, err
		}
	}
	return latest, nil
}

// eventsOf is a hold's lifecycle events, oldest first (its history).
func eventsOf(ctx context.Context, q store.Querier, holdID string) ([]*guardv1.HoldEvent, error) {
	rows, err := q.Query(ctx, `SELECT type, COALESCE(outcome, ''), resolver, created_at FROM hold_events
		WHERE hold_id = $1 ORDER BY cursor`, holdID)
	if err != nil {
		return nil, fmt.Errorf("read the events of hold %s: %w", holdID, err)
	}
	defer rows.Close()
	var out []*guardv1.HoldEvent
	for rows.Next() {
		var (
			typ, outcome string
			ev           guardv1.HoldEvent
			at           time.Time
		)
		if err := rows.Scan(&typ, &outcome, &ev.Resolver, &at); err != nil {
			return nil, fmt.Errorf("read the events of hold %s: %w", holdID, err)
		}
		if ev.Type, err = enumword.Parse[guardv1.EventType](typ); err != nil {
			return nil, fmt.Errorf("hold %s: event type %q: %w", holdID, typ, err)
		}
		if ev.Outcome, err = enumword.Parse[guardv1.Outcome](outcome); err != nil {
			return nil, fmt.Errorf("hold %s: event outcome %q: %w", holdID, outcome, err)
		}
		ev.At = timestamppb.New(at)
		out = append(out, &ev)
	}
	return out, rows.Err()
}
