package approvals

import (
	"context"
	"fmt"
	"time"

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

// readEvents reads up to limit events after cursor, oldest first.
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

// LatestCursor is the newest event's cursor (0 when none).
func LatestCursor(ctx context.Context, q store.Querier) (int64, error) {
	var c int64
	if err := q.QueryRow(ctx, `SELECT COALESCE(max(cursor), 0) FROM hold_events`).Scan(&c); err != nil {
		return 0, fmt.Errorf("latest hold event: %w", err)
	}
	return c, nil
}
