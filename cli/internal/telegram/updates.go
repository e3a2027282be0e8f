package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/click"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// pollLoop long-polls Telegram and handles each update in order. The
// offset (which confirms updates to Telegram) moves past an update only
// after it is handled and the new offset is on disk; a stop mid-batch
// leaves the rest unconfirmed, so Telegram hands them out again.
func (b *Bridge) pollLoop(ctx context.Context) error {
	delays := b.retryDelays()
	for ctx.Err() == nil {
		ups, err := b.api.getUpdates(ctx, b.st.snapshot().UpdateOffset, b.cfg.PollTimeout)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			b.m.Errors.WithLabelValues("get_updates").Inc()
			delay := delays.NextBackOff()
			b.log.Warn("getUpdates failed", "err", err, "retry_in", delay)
			if !sleep(ctx, delay) {
				return nil
			}
			continue
		}
		delays.Reset()
		b.lastPoll.Store(time.Now().UnixNano())
		for _, u := range ups {
			if ctx.Err() != nil {
				return nil
			}
			w, done := b.work(ctx)
			err := b.retry(w, "route", func(c context.Context) error { return b.handleUpdate(c, u) })
			done()
			if err != nil && transient(err) {
				return nil // stopped while the server was away: Telegram redelivers it
			}
			if err != nil {
				b.log.Error("update dropped", "update", u.ID, "err", err)
			}
			if err := b.saveOffset(ctx, u.ID+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// saveOffset persists the next update offset, retrying a failing disk
// until stopped (moving on without it would handle the update again after
// a restart).
func (b *Bridge) saveOffset(ctx context.Context, next int64) error {
	for {
		err := b.st.update(func(s *State) { s.UpdateOffset = next })
		if err == nil {
			return nil
		}
		b.m.Errors.WithLabelValues("state").Inc()
		b.log.Error("saving the update offset failed", "err", err)
		if !sleep(ctx, time.Second) {
			return fmt.Errorf("stopping with an unsaved update offset: %w", err)
		}
	}
}

func (b *Bridge) handleUpdate(ctx context.Context, u *models.Update) error {
	switch {
	case u.CallbackQuery != nil:
		return b.handleClick(ctx, u.CallbackQuery)
	case u.Message != nil:
		return b.handleMessage(ctx, u.Message)
	}
	return nil
}

// handleMessage routes one message through RouteInbound and reflects the
// answer to the chat.
func (b *Bridge) handleMessage(ctx context.Context, m *models.Message) error {
	if m.From == nil || m.From.IsBot {
		return nil
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	if strings.TrimSpace(text) == "" {
		return nil // stickers, photos without caption, joins: nothing to route
	}
	isGroup := m.Chat.Type != models.ChatTypePrivate
	req := &guardv1.RouteInboundRequest{
		ChannelType:  ChannelType,
		PlatformId:   strconv.FormatInt(m.Chat.ID, 10),
		ChatName:     chatName(m.Chat),
		IsGroup:      isGroup,
		SenderUserId: userID(m.From.ID),
		SenderName:   displayName(m.From),
		MessageId:    fmt.Sprintf("%d:%d", m.Chat.ID, m.ID),
		Text:         text,
	}
	resp, err := b.rgy.RouteInbound(ctx, req)
	if err != nil {
		if !transient(err) {
			b.m.Errors.WithLabelValues("route").Inc()
		}
		return fmt.Errorf("RouteInbound: %w", err)
	}
	b.m.MessagesIn.WithLabelValues(outcomeLabel(resp.GetOutcome())).Inc()
	b.log.Info("message routed", "chat", m.Chat.ID, "sender", req.SenderUserId, "outcome", outcomeLabel(resp.GetOutcome()),
		"hold", resp.GetHoldId(), "session", resp.GetSessionId())
	if answer := reflection(resp); answer != "" {
		if _, err := b.api.send(ctx, m.Chat.ID, answer, nil); err != nil {
			b.m.Errors.WithLabelValues("send").Inc()
			b.log.Warn("reflecting the route answer failed", "chat", m.Chat.ID, "err", err)
		} else {
			b.m.MessagesOut.WithLabelValues("answer").Inc()
		}
	}
	return nil
}

// reflection is what the chat is told about its message: nothing when it
// reached the agent (the agent answers) or was dropped by policy; a short
// line when it waits for a human, or when it was a captured reply.
func reflection(r *guardv1.RouteInboundResponse) string {
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

func chatName(c models.Chat) string {
	switch {
	case c.Title != "":
		return c.Title
	case c.Username != "":
		return "@" + c.Username
	}
	return strings.TrimSpace(c.FirstName + " " + c.LastName)
}

func displayName(u *models.User) string {
	if u.Username != "" {
		return "@" + u.Username
	}
	return strings.TrimSpace(u.FirstName + " " + u.LastName)
}

// callbackData names a hold and the index of the pressed option (Telegram
// allows 64 bytes; option values such as "connect:<group id>" may not fit).
func callbackData(holdID string, option int) string {
	return fmt.Sprintf("h:%s:%d", holdID, option)
}

func parseCallbackData(d string) (string, int, bool) {
	rest, ok := strings.CutPrefix(d, "h:")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rest[:i], n, true
}

// resolution maps a pressed option to Resolve: "reject…" options reject
// (the value travels as the choice, so "reject_with_reason" arms the
// reason capture); every other option approves with its value as the
// choice (channel registration's "connect:<group>" and "new").
func resolution(value string) (guardv1.Outcome, string) {
	if strings.HasPrefix(value, "reject") {
		return guardv1.Outcome_OUTCOME_REJECT, value
	}
	return guardv1.Outcome_OUTCOME_APPROVE, value
}

// handleClick resolves a hold as the pressing user. Refusals are answered
// on the button; the card itself is edited from the Watch stream when the
// hold resolves, whichever path resolved it.
func (b *Bridge) handleClick(ctx context.Context, q *models.CallbackQuery) error {
	holdID, idx, ok := parseCallbackData(q.Data)
	if !ok {
		b.answer(ctx, q.ID, "Unknown button.", false)
		b.m.Clicks.WithLabelValues("stale").Inc()
		return nil
	}
	clicker := userID(q.From.ID)
	got, err := b.appr.Get(ctx, &guardv1.GetRequest{Id: holdID})
	if err != nil {
		if transient(err) {
			return err
		}
		b.answer(ctx, q.ID, "This request no longer exists.", false)
		b.m.Clicks.WithLabelValues("stale").Inc()
		return nil
	}
	hold := got.GetHold()
	if idx >= len(hold.GetOptions()) {
		b.answer(ctx, q.ID, "This button is out of date.", false)
		b.m.Clicks.WithLabelValues("stale").Inc()
		return nil
	}
	value := hold.GetOptions()[idx].GetValue()
	outcome, choice := resolution(value)
	// A click the server cannot take now is asked again after its hint
	// (click.Resolve); one still refused that way goes back to the update
	// loop's retry, which asks again. A button pressed twice, or an attempt
	// whose answer was lost, is recognised as this user's resolution.
	res, err := click.Resolve(ctx, click.Calls{
		Resolve: func(ctx context.Context, r *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
			return b.appr.Resolve(ctx, r)
		},
		Get: func(ctx context.Context, id string) (*guardv1.Hold, error) {
			g, err := b.appr.Get(ctx, &guardv1.GetRequest{Id: id})
			return g.GetHold(), err
		},
	}, &guardv1.ResolveRequest{Id: holdID, Outcome: outcome, AsUser: clicker, Choice: choice}, click.Options{
		Clicker: clicker, Earlier: true,
		OnRetry: func(err error, wait time.Duration) {
			b.log.Warn("click not taken now; asking again", "hold", holdID, "user", clicker, "err", err, "in", wait)
		},
	})
	if err != nil {
		if transient(err) {
			return err
		}
		msg := status.Convert(err).Message()
		switch status.Code(err) {
		case codes.PermissionDenied:
			b.answer(ctx, q.ID, "You may not decide this request.", true)
			b.m.Clicks.WithLabelValues("refused").Inc()
		case codes.FailedPrecondition, codes.NotFound:
			b.answer(ctx, q.ID, "Not possible now: "+msg, true)
			b.m.Clicks.WithLabelValues("stale").Inc()
		default:
			b.answer(ctx, q.ID, "Failed: "+msg, true)
			b.m.Clicks.WithLabelValues("error").Inc()
		}
		b.log.Info("click refused", "hold", holdID, "user", clicker, "option", value, "err", err)
		return nil
	}
	h := res.Hold
	b.log.Info("click resolved", "hold", holdID, "user", clicker, "option", value, "status", h.GetStatus().String(), "repeated", res.Repeated)
	switch {
	case h.GetAwaitingReasonFrom() == clicker && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING:
		b.m.Clicks.WithLabelValues("awaiting_reason").Inc()
		b.answer(ctx, q.ID, "Send the reason as your next message.", false)
		b.prompt(ctx, q.From.ID, fmt.Sprintf("✍️ Reply with the reason for rejecting “%s” (at most 280 characters).", h.GetTitle()))
		b.noteOnCard(ctx, h, "✍️ Waiting for the reason from "+clicker)
	case value == "new":
		b.m.Clicks.WithLabelValues("resolved").Inc()
		b.answer(ctx, q.ID, "Send the new agent's name as your next message.", false)
		b.prompt(ctx, q.From.ID, "✍️ Reply with the name of the new agent for this chat.")
	case h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING && outcome == guardv1.Outcome_OUTCOME_APPROVE:
		// One approval of a quorum: recorded, more are needed.
		b.m.Clicks.WithLabelValues("resolved").Inc()
		counted := 0
		for _, a := range h.GetApprovals() {
			if !a.GetIneligible() {
				counted++
			}
		}
		progress := fmt.Sprintf("%d of %d", counted, h.GetApprovalsRequired())
		b.answer(ctx, q.ID, "Approval recorded ("+progress+").", false)
		b.noteOnCard(ctx, h, "👍 "+clicker+" approved ("+progress+" approvals)")
	default:
		b.m.Clicks.WithLabelValues("resolved").Inc()
		b.answer(ctx, q.ID, "Done.", false)
	}
	return nil
}

func (b *Bridge) answer(ctx context.Context, callbackID, text string, alert bool) {
	if err := b.api.answer(ctx, callbackID, text, alert); err != nil {
		b.m.Errors.WithLabelValues("send").Inc()
		b.log.Warn("answering a button press failed", "err", err)
	}
}

// prompt asks the clicker, in their private chat, for the reply a capture
// waits for.
func (b *Bridge) prompt(ctx context.Context, telegramUserID int64, text string) {
	if _, err := b.api.send(ctx, telegramUserID, text, nil); err != nil {
		b.m.Errors.WithLabelValues("send").Inc()
		b.log.Warn("prompting for a reply failed", "user", telegramUserID, "err", err)
		return
	}
	b.m.MessagesOut.WithLabelValues("prompt").Inc()
}
