package slack

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/clawguard/clawguard/cli/internal/bridge"
)

// Receive runs the Socket Mode connection (the library reconnects by
// itself) and handles its envelopes one at a time, in order. The
// connection outlives ctx until the item in hand is handled and
// acknowledged.
func (a *adapter) Receive(ctx context.Context) error {
	sock, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	ended := make(chan error, 1)
	go func() { ended <- a.sm.RunContext(sock) }()
	for {
		select {
		case <-ctx.Done():
			stop()
			<-ended
			return nil
		case err := <-ended:
			// Only a refused token ends the library's reconnect loop.
			a.connected.Store(false)
			return fmt.Errorf("slack socket mode: %w", err)
		case ev := <-a.sm.Events:
			a.handle(ctx, ev)
		}
	}
}

func (a *adapter) handle(ctx context.Context, ev socketmode.Event) {
	switch ev.Type {
	case socketmode.EventTypeConnected, socketmode.EventTypeHello:
		a.connected.Store(true)
	case socketmode.EventTypeConnecting:
		a.connected.Store(false)
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		a.connected.Store(false)
		a.core.Metrics().Errors.WithLabelValues("socket").Inc()
		a.log.Warn("slack socket mode connection failed; reconnecting", "event", ev.Type, "detail", fmt.Sprint(ev.Data))
	case socketmode.EventTypeInvalidAuth:
		a.connected.Store(false)
		a.log.Error("slack refused the app-level token")
	case socketmode.EventTypeErrorBadMessage:
		a.core.Metrics().Errors.WithLabelValues("socket").Inc()
		a.log.Warn("unreadable socket mode message", "detail", fmt.Sprint(ev.Data))
	case socketmode.EventTypeEventsAPI:
		e, _ := ev.Data.(slackevents.EventsAPIEvent)
		if m, ok := e.InnerEvent.Data.(*slackevents.MessageEvent); ok && e.Type == slackevents.CallbackEvent {
			if !a.core.Handle(ctx, "route", "message "+m.Channel+"/"+m.TimeStamp, func(c context.Context) error { return a.message(c, m) }) {
				return // stopped while the server was away: unacknowledged, Slack delivers it again
			}
		}
		a.ack(ev)
	case socketmode.EventTypeInteractive:
		a.ack(ev) // at once: Slack shows the presser an error after 3 seconds, and never sends it again
		cb, _ := ev.Data.(slack.InteractionCallback)
		a.interaction(ctx, cb)
	case socketmode.EventTypeSlashCommand:
		a.ack(ev)
	}
}

func (a *adapter) ack(ev socketmode.Event) {
	if ev.Request == nil || ev.Request.EnvelopeID == "" {
		return
	}
	if err := a.sm.Ack(*ev.Request); err != nil {
		a.core.Metrics().Errors.WithLabelValues("socket").Inc()
		a.log.Warn("acknowledging a socket mode envelope failed", "envelope", ev.Request.EnvelopeID, "err", err)
	}
}

// message routes a user's message: new messages only (not edits, joins or
// bots, the bridge's own included). A DM routes as the chat of its user.
func (a *adapter) message(ctx context.Context, m *slackevents.MessageEvent) error {
	switch m.SubType {
	case "", "thread_broadcast", "file_share":
	default:
		return nil
	}
	if m.User == "" || m.BotID != "" || m.User == a.botUser {
		return nil
	}
	msg := bridge.Message{
		Sender: m.User, SenderName: a.name(ctx, m.User, false),
		ID: m.Channel + ":" + m.TimeStamp, Text: m.Text,
	}
	if m.ChannelType == "im" {
		msg.Chat, msg.ChatName = m.User, msg.SenderName
	} else {
		msg.Chat, msg.ChatName, msg.IsGroup = m.Channel, a.name(ctx, m.Channel, true), true
	}
	return a.core.HandleMessage(ctx, msg)
}

// interaction handles a button press or a submitted reason form.
func (a *adapter) interaction(ctx context.Context, cb slack.InteractionCallback) {
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		for _, act := range cb.ActionCallback.BlockActions {
			if act.Value == "" {
				continue // a link button (the console): Slack opened it
			}
			c := bridge.Click{ID: cb.TriggerID, Handle: cb.User.ID, Data: act.Value,
				Message: bridge.ID(cb.Container.MessageTs), Chat: bridge.ID(cb.Container.ChannelID)}
			a.core.Handle(ctx, "resolve", "press on "+c.Chat.String()+"/"+c.Message.String(), func(w context.Context) error { return a.core.HandleClick(w, c) })
		}
	case slack.InteractionTypeViewSubmission:
		if cb.View.CallbackID != reasonForm || cb.View.State == nil {
			return
		}
		reason := cb.View.State.Values[reasonBlock][reasonBlock].Value
		a.core.Handle(ctx, "resolve", "reason for "+cb.View.PrivateMetadata, func(w context.Context) error {
			return a.core.SubmitReason(w, cb.User.ID, cb.View.PrivateMetadata, reason)
		})
	}
}

// name is a user's display name or a channel's name ("" when Slack does
// not say: it is only shown), remembered once read.
func (a *adapter) name(ctx context.Context, id string, channel bool) string {
	a.mu.Lock()
	n, ok := a.names[id]
	a.mu.Unlock()
	if ok {
		return n
	}
	if channel {
		ch, err := a.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: id})
		if err != nil {
			a.log.Debug("conversations.info failed", "channel", id, "err", err)
			return ""
		}
		n = "#" + ch.Name
	} else {
		u, err := a.api.GetUserInfoContext(ctx, id)
		if err != nil {
			a.log.Debug("users.info failed", "user", id, "err", err)
			return ""
		}
		n = u.Profile.DisplayName
		if n == "" {
			n = u.RealName
		}
		if n == "" {
			n = u.Name
		}
	}
	a.mu.Lock()
	a.names[id] = n
	a.mu.Unlock()
	return n
}
