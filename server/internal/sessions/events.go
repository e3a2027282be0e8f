package sessions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/clawguard/clawguard/server/internal/store"
)

// EventTx records a session event (the session's history): direction "in"
// (to the agent) or "out" (from it), a kind ("message", "notice",
// "action") and its body.
func EventTx(ctx context.Context, q store.Querier, sessionID, direction, kind string, body map[string]any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode session event: %w", err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO session_events (session_id, direction, kind, body) VALUES ($1, $2, $3, $4)`, sessionID, direction, kind, b); err != nil {
		return fmt.Errorf("record session event: %w", err)
	}
	return nil
}

// TouchTx marks the session active now (a message was delivered to it).
func TouchTx(ctx context.Context, q store.Querier, id string) error {
	if _, err := q.Exec(ctx, `UPDATE sessions SET last_active_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("touch session %s: %w", id, err)
	}
	return nil
}
