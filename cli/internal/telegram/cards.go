package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// watchLoop follows Approvals.Watch from the stored cursor. Each event is
// handled (a card sent or edited) and then the cursor moves, in one atomic
// state write with the card map; a replayed event finds its card recorded
// and sends nothing twice.
func (b *Bridge) watchLoop(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := b.watchOnce(ctx)
		b.watching.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if status.Code(err) == codes.OutOfRange {
			// The server pruned events past our cursor: restart at its
			// current end; holds created meanwhile got no card here (ncl
			// and the webhook still reach their approvers).
			b.log.Error("Approvals.Watch cursor was pruned; continuing from the current end", "cursor", b.st.snapshot().WatchCursor)
			if err := b.st.update(func(s *State) { s.WatchCursor = -1 }); err != nil {
				return err
			}
		}
		b.m.Errors.WithLabelValues("watch").Inc()
		b.log.Warn("Approvals.Watch ended; reconnecting", "err", err, "in", delay)
		if !sleep(ctx, delay) {
			return nil
		}
		delay = min(2*delay, b.cfg.RetryMax)
	}
	return nil
}

func (b *Bridge) watchOnce(ctx context.Context) error {
	cursor := b.st.snapshot().WatchCursor
	req := &guardv1.WatchRequest{AfterCursor: cursor}
	if cursor < 0 {
		req = &guardv1.WatchRequest{FromNow: true}
	}
	stream, err := b.appr.Watch(ctx, req)
	if err != nil {
		return err
	}
	if _, err := stream.Header(); err != nil {
		return err
	}
	b.watching.Store(true)
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("stream closed by the server")
		}
		if err != nil {
			return err
		}
		w, done := b.work(ctx)
		err = b.retry(w, "watch", func(c context.Context) error { return b.handleEvent(c, ev) })
		done()
		if err != nil && transient(err) {
			return err // stopped or gave up: the event is handled again after reconnecting
		}
		if err != nil {
			b.log.Error("hold event not shown", "cursor", ev.GetCursor(), "hold", ev.GetHold().GetId(), "err", err)
			if err := b.st.update(func(s *State) { s.WatchCursor = ev.GetCursor() }); err != nil {
				return err
			}
		}
	}
}

// handleEvent shows one lifecycle event and records the cursor with it.
func (b *Bridge) handleEvent(ctx context.Context, ev *guardv1.WatchResponse) error {
	h := ev.GetHold()
	switch ev.GetType() {
	case guardv1.EventType_EVENT_TYPE_REQUESTED:
		return b.sendCard(ctx, ev.GetCursor(), h)
	case guardv1.EventType_EVENT_TYPE_RESOLVED:
		return b.closeCard(ctx, ev)
	}
	return b.st.update(func(s *State) { s.WatchCursor = ev.GetCursor() })
}

// sendCard DMs the card to the approver it was delivered to, when that is
// a Telegram user and the hold is still pending (a replay from an old
// cursor sends no cards for holds decided meanwhile).
func (b *Bridge) sendCard(ctx context.Context, cursor int64, h *guardv1.Hold) error {
	skip := func(why string) error {
		b.log.Debug("no card", "hold", h.GetId(), "why", why)
		return b.st.update(func(s *State) { s.WatchCursor = cursor })
	}
	if _, ok := b.st.card(h.GetId()); ok {
		return skip("card already sent")
	}
	handle, ok := strings.CutPrefix(h.GetDeliveredTo(), ChannelType+":")
	if !ok {
		return skip("not delivered to a telegram user")
	}
	chatID, err := strconv.ParseInt(handle, 10, 64)
	if err != nil {
		b.m.Cards.WithLabelValues("skipped").Inc()
		b.log.Warn("card not sent: telegram users are telegram:<numeric user id>", "hold", h.GetId(), "delivered_to", h.GetDeliveredTo())
		return skip("delivered-to is not a numeric telegram id")
	}
	cur, err := b.appr.Get(ctx, &guardv1.GetRequest{Id: h.GetId()})
	if err != nil {
		if transient(err) {
			return err
		}
		return skip("hold unreadable: " + err.Error())
	}
	if cur.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		return skip("already resolved")
	}
	text := cardText(h)
	msgID, err := b.api.send(ctx, chatID, text, keyboard(h))
	if err != nil {
		if !transient(err) {
			b.m.Errors.WithLabelValues("send").Inc()
			b.log.Warn("card not delivered (has the approver started the bot?)", "hold", h.GetId(), "chat", chatID, "err", err)
			return skip("sendMessage refused")
		}
		return err
	}
	b.m.Cards.WithLabelValues("sent").Inc()
	b.log.Info("card sent", "hold", h.GetId(), "kind", h.GetKind(), "to", h.GetDeliveredTo(), "message", msgID)
	return b.st.update(func(s *State) {
		s.Cards[h.GetId()] = Card{ChatID: chatID, MessageID: msgID, Text: text}
		s.WatchCursor = cursor
	})
}

// closeCard edits a resolved hold's card: who decided and how, or that it
// expired; the buttons go.
func (b *Bridge) closeCard(ctx context.Context, ev *guardv1.WatchResponse) error {
	h := ev.GetHold()
	c, ok := b.st.card(h.GetId())
	if !ok {
		return b.st.update(func(s *State) { s.WatchCursor = ev.GetCursor() })
	}
	if err := b.api.edit(ctx, c.ChatID, c.MessageID, c.Text+"\n\n"+outcomeLine(ev), nil); err != nil {
		if transient(err) {
			return err
		}
		b.m.Errors.WithLabelValues("edit").Inc()
		b.log.Warn("card not edited", "hold", h.GetId(), "err", err)
	} else {
		b.m.Cards.WithLabelValues("edited").Inc()
	}
	return b.st.update(func(s *State) {
		delete(s.Cards, h.GetId())
		s.WatchCursor = ev.GetCursor()
	})
}

// noteOnCard adds a line under a pending card and keeps its buttons.
func (b *Bridge) noteOnCard(ctx context.Context, h *guardv1.Hold, line string) {
	holdID := h.GetId()
	c, ok := b.st.card(holdID)
	if !ok {
		return
	}
	if err := b.api.edit(ctx, c.ChatID, c.MessageID, c.Text+"\n\n"+line, keyboard(h)); err != nil {
		b.m.Errors.WithLabelValues("edit").Inc()
		b.log.Warn("card note not shown", "hold", holdID, "err", err)
	}
}

func cardText(h *guardv1.Hold) string {
	var sb strings.Builder
	title := h.GetTitle()
	if title == "" {
		title = h.GetKind()
	}
	fmt.Fprintf(&sb, "🔐 %s", title)
	if q := h.GetQuestion(); q != "" {
		fmt.Fprintf(&sb, "\n\n%s", q)
	}
	if e := h.GetExpiresAt(); e != nil {
		fmt.Fprintf(&sb, "\n\nExpires %s.", e.AsTime().UTC().Format("2006-01-02 15:04 MST"))
	}
	fmt.Fprintf(&sb, "\n(%s)", h.GetId())
	return sb.String()
}

// keyboard has one row per option of the hold.
func keyboard(h *guardv1.Hold) *models.InlineKeyboardMarkup {
	kb := &models.InlineKeyboardMarkup{}
	for i, o := range h.GetOptions() {
		kb.InlineKeyboard = append(kb.InlineKeyboard, []models.InlineKeyboardButton{{Text: o.GetLabel(), CallbackData: callbackData(h.GetId(), i)}})
	}
	return kb
}

func outcomeLine(ev *guardv1.WatchResponse) string {
	h := ev.GetHold()
	switch ev.GetOutcome() {
	case guardv1.Outcome_OUTCOME_APPROVE:
		line := "✅ Approved by " + ev.GetResolver()
		if l := optionLabel(h, h.GetChoice()); l != "" && h.GetChoice() != "approve" {
			line += " — " + l
		}
		return line
	case guardv1.Outcome_OUTCOME_REJECT:
		line := "❌ Rejected by " + ev.GetResolver()
		if r := h.GetReason(); r != "" {
			line += ": “" + r + "”"
		}
		return line
	case guardv1.Outcome_OUTCOME_EXPIRE:
		return "⌛ Expired without a decision."
	case guardv1.Outcome_OUTCOME_SWEEP:
		return "⌛ Expired: the control plane restarted while it waited."
	}
	return "Resolved."
}

func optionLabel(h *guardv1.Hold, value string) string {
	for _, o := range h.GetOptions() {
		if o.GetValue() == value {
			return o.GetLabel()
		}
	}
	return ""
}
