package bridge

import (
	"context"
	"errors"
	"io"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// outboxLoop delivers agent replies and notices for the bridge's chats
// from the chat outbox, moving the stored cursor after each one.
func (b *Bridge) outboxLoop(ctx context.Context) error {
	return b.follow(ctx, "outbox", "chat outbox stream", &b.outboxing, b.outboxOnce, nil)
}

func (b *Bridge) outboxOnce(ctx context.Context) error {
	stream, err := b.rgy.WatchChatOutbox(ctx, &guardv1.WatchChatOutboxRequest{ChannelType: b.spec.Namespace, AfterCursor: b.st.snapshot().OutboxCursor})
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
		err = b.finish(ctx, "send", func(c context.Context) error { return b.deliver(c, m) })
		if err != nil && b.Transient(err) {
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
	text, kind := m.GetText(), "reply"
	if m.GetKind() == guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_NOTICE {
		text, kind = "ℹ️ "+text, "notice"
	}
	if _, err := b.chat.Post(ctx, m.GetPlatformId(), text, nil); err != nil {
		return err
	}
	b.m.MessagesOut.WithLabelValues(kind).Inc()
	return nil
}
