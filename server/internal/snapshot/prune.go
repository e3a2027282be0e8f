package snapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/clawguard/clawguard/server/internal/store"
)

// FactChangesKept is how long fact_changes keeps what each fact revision
// changed: a replica whose snapshot is older than that reloads it whole
// instead of catching up (package snapshot).
const FactChangesKept = time.Hour

// PruneFactChanges deletes the changes of up to batch of the oldest fact
// revisions recorded before cutoff, whole revisions only and oldest first:
// a snapshot catching up treats the oldest revision it finds as complete,
// so a revision must never be left half deleted, nor one deleted while an
// older one stays. It reports the revisions deleted.
func PruneFactChanges(ctx context.Context, db store.Querier, before time.Time, batch int) (int64, error) {
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
