package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/sessions"
)

// deliver pushes the message to the agent group's session for this chat
// (opened on the least-loaded live runner its pin matches when there is
// none: sessions.FindOrOpenTx), in one transaction with the
// session event, so the delivery is durable once RouteInbound answers. A
// bridge retrying the same message id creates no second push.
func (s *Service) deliver(ctx context.Context, mgID, agentGroupID string, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, error) {
	var sessionID string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if sessionID, err = sessions.FindOrOpenTx(ctx, tx, agentGroupID, mgID); err != nil {
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
		if retried, err := pushes.Exists(ctx, tx, p.Id); err != nil || retried {
			return err // retried: a message already delivered
		}
		if _, err := pushes.EnqueueTx(ctx, tx, sessionID, p); err != nil {
			return err
		}
		if err := sessions.EventTx(ctx, tx, sessionID, "in", "message", map[string]any{
			"message_id": m.GetMessageId(), "sender_user_id": m.GetSenderUserId(),
			"messaging_group_id": mgID, "text": m.GetText(), "push_id": p.Id,
		}); err != nil {
			return err
		}
		return sessions.TouchTx(ctx, tx, sessionID)
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
