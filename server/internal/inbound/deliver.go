package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// deliver pushes the message to the agent group's session for this chat
// (opened on a live runner when there is none), in one transaction with the
// session event, so the delivery is durable once RouteInbound answers. A
// bridge retrying the same message id creates no second push.
func (s *Service) deliver(ctx context.Context, mgID, agentGroupID string, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, error) {
	var sessionID string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if sessionID, err = s.sessions(ctx, tx, agentGroupID, mgID); err != nil {
			return fmt.Errorf("session for %s: %w", agentGroupID, err)
		}
		p := &guardv1.Push{
			Id: deliveryPushID(m, sessionID),
			Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{
				MessageId:    m.GetMessageId(),
				SenderUserId: m.GetSenderUserId(),
				Text:         m.GetText(),
				Payload:      m.GetPayload(),
			}},
		}
		tag, err := tx.Exec(ctx, `SELECT 1 FROM runner_pushes WHERE id = $1`, p.Id)
		if err != nil {
			return fmt.Errorf("check earlier delivery: %w", err)
		}
		if tag.RowsAffected() > 0 {
			return nil // a retried message: already delivered
		}
		if _, err := pushes.EnqueueTx(ctx, tx, sessionID, p); err != nil {
			return err
		}
		body, err := json.Marshal(map[string]any{
			"message_id": m.GetMessageId(), "sender_user_id": m.GetSenderUserId(),
			"messaging_group_id": mgID, "text": m.GetText(), "push_id": p.Id,
		})
		if err != nil {
			return fmt.Errorf("encode session event: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO session_events (session_id, direction, kind, body) VALUES ($1, 'in', 'message', $2)`,
			sessionID, body); err != nil {
			return fmt.Errorf("record session event: %w", err)
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET last_active_at = now() WHERE id = $1`, sessionID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("deliver to %s: %w", agentGroupID, err)
	}
	r := outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED, mgID, "")
	r.SessionId = sessionID
	return r, nil
}

// deliveryPushID makes the push id a function of the chat message and the
// session, so a retried message (same id) is one push. Messages without an
// id get a fresh push each time.
func deliveryPushID(m *guardv1.RouteInboundRequest, sessionID string) string {
	if m.GetMessageId() == "" {
		return pushes.NewID()
	}
	h := sha256.Sum256([]byte(m.GetChannelType() + "\x00" + m.GetPlatformId() + "\x00" + m.GetMessageId() + "\x00" + sessionID))
	return "push_in_" + hex.EncodeToString(h[:12])
}

// fallbackSessionTx finds the active session of the group for this chat or
// opens one, assigned to the live runner with the fewest active sessions
// (none live: unassigned; the push waits and follows the session when a
// runner takes it). Used when no SessionOpener is configured.
func fallbackSessionTx(ctx context.Context, tx pgx.Tx, agentGroupID, mgID string) (string, error) {
	// Serialise concurrent first messages of one chat so they share a session.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('inbound-session:' || $1 || ':' || $2))`, agentGroupID, mgID); err != nil {
		return "", err
	}
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM sessions
		WHERE agent_group_id = $1 AND messaging_group_id = $2 AND status = 'active'
		ORDER BY last_active_at DESC LIMIT 1`, agentGroupID, mgID).Scan(&id)
	if err == nil {
		return id, nil
	}
	if err != pgx.ErrNoRows {
		return "", err
	}
	var runner *string
	err = tx.QueryRow(ctx, `SELECT r.id FROM runners r
		WHERE r.lease_expires_at > now()
		ORDER BY (SELECT count(*) FROM sessions s WHERE s.runner_id = r.id AND s.status = 'active'), r.id
		LIMIT 1`).Scan(&runner)
	if err != nil && err != pgx.ErrNoRows {
		return "", err
	}
	id = store.NewID("sess_", 10)
	_, err = tx.Exec(ctx, `INSERT INTO sessions (id, agent_group_id, messaging_group_id, runner_id) VALUES ($1, $2, $3, $4)`,
		id, agentGroupID, mgID, runner)
	return id, err
}
