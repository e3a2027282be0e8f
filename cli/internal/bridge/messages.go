package bridge

import (
	"context"
	"fmt"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Message is a chat message the bot saw, as the chat received it.
type Message struct {
	Chat       string // the platform's chat id (a messaging group's platform id)
	ChatName   string
	IsGroup    bool   // a group chat or channel, not the sender's DM with the bot
	Sender     string // the sender's platform id (after "<namespace>:")
	SenderName string
	ID         string // unique among the platform's messages (the server recognises a retried one)
	Text       string
}

// HandleMessage routes one message through RouteInbound and reflects the
// answer to the chat.
func (b *Bridge) HandleMessage(ctx context.Context, m Message) error {
	if strings.TrimSpace(m.Text) == "" {
		return nil // stickers, photos without caption, joins: nothing to route
	}
	if !m.IsGroup {
		if c, ok := parseChatCommand(m.Text); ok {
			return b.runChatCommand(ctx, m, c)
		}
	}
	req := &guardv1.RouteInboundRequest{
		ChannelType:  b.spec.Namespace,
		PlatformId:   m.Chat,
		ChatName:     m.ChatName,
		IsGroup:      m.IsGroup,
		SenderUserId: b.UserID(m.Sender),
		SenderName:   m.SenderName,
		MessageId:    m.ID,
		Text:         m.Text,
	}
	resp, err := b.rgy.RouteInbound(ctx, req)
	if err != nil {
		if !b.Transient(err) {
			b.m.Errors.WithLabelValues("route").Inc()
		}
		return fmt.Errorf("RouteInbound: %w", err)
	}
	b.m.MessagesIn.WithLabelValues(outcomeLabel(resp.GetOutcome())).Inc()
	b.log.Info("message routed", "chat", m.Chat, "sender", req.SenderUserId, "outcome", outcomeLabel(resp.GetOutcome()),
		"hold", resp.GetHoldId(), "session", resp.GetSessionId())
	if answer := Reflection(resp); answer != "" {
		if _, err := b.chat.Post(ctx, m.Chat, answer, nil); err != nil {
			b.m.Errors.WithLabelValues("send").Inc()
			b.log.Warn("reflecting the route answer failed", "chat", m.Chat, "err", err)
		} else {
			b.m.MessagesOut.WithLabelValues("answer").Inc()
		}
	}
	return nil
}

// Reflection is what the chat is told about its message: nothing when it
// reached the agent (the agent answers) or was dropped by policy; a short
// line when it waits for a human, or when it was a captured reply.
func Reflection(r *guardv1.RouteInboundResponse) string {
	switch r.GetOutcome() {
	case guardv1.RouteOutcome_ROUTE_OUTCOME_HELD:
		return "⏳ Your message is waiting for an admin to let you in."
	case guardv1.RouteOutcome_ROUTE_OUTCOME_REGISTRATION_PENDING:
		if r.GetReason() == "channel registration requested" {
			return "⏳ This chat is not connected to an agent yet; an admin has been asked to connect it."
		}
	case guardv1.RouteOutcome_ROUTE_OUTCOME_NAME_CAPTURED, guardv1.RouteOutcome_ROUTE_OUTCOME_REASON_CAPTURED:
		return "✍️ " + r.GetReason()
	case guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED:
		if r.GetHoldId() != "" || strings.HasPrefix(r.GetReason(), "agent name reply") {
			return "⚠️ " + r.GetReason() // a refused capture: the approver should know
		}
	}
	return ""
}

func outcomeLabel(o guardv1.RouteOutcome) string {
	switch o {
	case guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED:
		return "delivered"
	case guardv1.RouteOutcome_ROUTE_OUTCOME_HELD:
		return "held"
	case guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED:
		return "dropped"
	case guardv1.RouteOutcome_ROUTE_OUTCOME_REGISTRATION_PENDING:
		return "registration_pending"
	case guardv1.RouteOutcome_ROUTE_OUTCOME_NAME_CAPTURED:
		return "name_captured"
	case guardv1.RouteOutcome_ROUTE_OUTCOME_REASON_CAPTURED:
		return "reason_captured"
	}
	return "unspecified"
}
