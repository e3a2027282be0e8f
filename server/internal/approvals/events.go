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
