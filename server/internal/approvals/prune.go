package approvals

import (
	"context"
	"fmt"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// PruneHoldEvents deletes up to batch hold events created before cutoff,
// except those of holds still pending (their "requested" event is how a
// watcher learns of them). The same statement raises the pruned-through
// watermark, so a Watch can tell a pruned cursor from a quiet one.
func PruneHoldEvents(ctx context.Context, db store.Querier, before time.Time, batch int) (int64, error) {
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
func PrunedThrough(ctx context.Context, db store.Querier) (int64, error) {
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
