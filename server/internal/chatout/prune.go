package chatout

import (
	"context"
	"fmt"
	"time"

	"github.com/clawguard/clawguard/server/internal/store"
)

// PruneChatOutbox deletes up to batch chat outbox messages queued before
// cutoff (the event retention: a bridge down for longer misses them).
func PruneChatOutbox(ctx context.Context, db store.Querier, before time.Time, batch int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM chat_outbox WHERE cursor IN (
		SELECT cursor FROM chat_outbox WHERE created_at < $1 ORDER BY cursor LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, batch)
	if err != nil {
		return 0, fmt.Errorf("prune chat outbox: %w", err)
	}
	return tag.RowsAffected(), nil
}
