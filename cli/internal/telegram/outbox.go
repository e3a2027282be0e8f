package telegram

import (
	"context"
	"errors"
	"io"
	"strconv"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// outboxLoop delivers agent replies and notices for Telegram chats from
// the chat outbox, moving the stored cursor after each one.
func (b *Bridge) outboxLoop(ctx context.Context) error {
	delays := b.retryDelays()
	for ctx.Err() == nil {
		err := b.outboxOnce(ctx)
		b.outboxing.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		b.m.Errors.WithLabelValues("outbox").Inc()
		delay := delays.NextBackOff()
		b.log.Warn("chat outbox stream ended; reconnecting", "err", err, "in", delay)
		if !sleep(ctx, delay) {
			return nil
		}
	}
	return nil
}

func (b *Bridge) outboxOnce(ctx context.Context) error {
	stream, err := b.rgy.WatchChatOutbox(ctx, &guardv1.WatchChatOutboxRequest{ChannelType: ChannelType, AfterCursor: b.st.snapshot().OutboxCursor})
	if err != nil {
		return err
	}
	b.outboxing.Store(true)
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("stream closed by the server")
		}
		if err != nil {
			return err
		}
		w, done := b.work(ctx)
		err = b.retry(w, "send", func(c context.Context) error { return b.deliver(c, m) })
		done()
		if err != nil && transient(err) {
			return err
		}
		if err != nil {
			b.m.Errors.WithLabelValues("send").Inc()
			b.log.Warn("chat message not delivered", "chat", m.GetPlatformId(), "cursor", m.GetCursor(), "err", err)
		}
		if err := b.st.update(func(s *State) { s.OutboxCursor = m.GetCursor() }); err != nil {
			return err
		}
	}
}

func (b *Bridge) deliver(ctx context.Context, m *guardv1.WatchChatOutboxResponse) error {
	chatID, err := strconv.ParseInt(m.GetPlatformId(), 10, 64)
	if err != nil {
		return errors.New("platform id " + strconv.Quote(m.GetPlatformId()) + " is not a telegram chat id")
	}
	text, kind := m.GetText(), "reply"
	if m.GetKind() == guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_NOTICE {
		text, kind = "ℹ️ "+text, "notice"
	}
	if _, err := b.api.send(ctx, chatID, text, nil); err != nil {
		return err
	}
	b.m.MessagesOut.WithLabelValues(kind).Inc()
	return nil
}
