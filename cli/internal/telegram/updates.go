package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/clawguard/clawguard/cli/internal/bridge"
)

// pollLoop long-polls Telegram and hands each update to the core in
// order. The offset (which confirms updates to Telegram) moves past an
// update only after it is handled and the new offset is on disk; a stop
// mid-batch leaves the rest unconfirmed, so Telegram hands them out again.
func (t *adapter) pollLoop(ctx context.Context) error {
	delays := t.core.RetryDelays()
	for ctx.Err() == nil {
		ups, err := t.api.getUpdates(ctx, t.core.State().InboundOffset, t.pollTimeout)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			t.core.Metrics().Errors.WithLabelValues("get_updates").Inc()
			delay := delays.NextBackOff()
			t.log.Warn("getUpdates failed", "err", err, "retry_in", delay)
			if !bridge.Sleep(ctx, delay) {
				return nil
			}
			continue
		}
		delays.Reset()
		t.lastPoll.Store(time.Now().UnixNano())
		for _, u := range ups {
			if ctx.Err() != nil {
				return nil
			}
			if !t.core.Handle(ctx, "route", "update "+strconv.FormatInt(u.ID, 10), func(c context.Context) error { return t.handleUpdate(c, u) }) {
				return nil // stopped while the server was away: Telegram redelivers it
			}
			if err := t.core.SaveInboundOffset(ctx, u.ID+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *adapter) handleUpdate(ctx context.Context, u *models.Update) error {
	switch {
	case u.CallbackQuery != nil:
		q := u.CallbackQuery
		return t.core.HandleClick(ctx, bridge.Click{ID: q.ID, Handle: strconv.FormatInt(q.From.ID, 10), Data: q.Data})
	case u.Message != nil:
		m := u.Message
		if m.From == nil || m.From.IsBot {
			return nil
		}
		text := m.Text
		if text == "" {
			text = m.Caption
		}
		return t.core.HandleMessage(ctx, bridge.Message{
			Chat:       strconv.FormatInt(m.Chat.ID, 10),
			ChatName:   chatName(m.Chat),
			IsGroup:    m.Chat.Type != models.ChatTypePrivate,
			Sender:     strconv.FormatInt(m.From.ID, 10),
			SenderName: displayName(m.From),
			ID:         fmt.Sprintf("%d:%d", m.Chat.ID, m.ID),
			Text:       text,
		})
	}
	return nil
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
