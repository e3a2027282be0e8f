// Package chatout is the chat outbox: agent replies and notices for a chat,
// queued in Postgres by the server and read by the chat's bridge from a
// cursor (WatchChatOutbox). The table is the truth; a reader polls it.
package chatout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// MaxTextChars bounds one chat message (Telegram's limit is 4096).
const MaxTextChars = 4096

// writeLockKey serialises outbox writers so cursors commit in order.
const writeLockKey int64 = 0x636c_6177_6f75_7462 // "clawoutb"

// Service queues and streams chat messages.
type Service struct {
	pool *pgxpool.Pool
	// Poll is how often an idle reader re-reads the table.
	Poll time.Duration
}

// New builds the service.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool, Poll: 200 * time.Millisecond} }

// Post queues text for the chat sessionID talks to. A session without a chat
// is FailedPrecondition; bad text is InvalidArgument.
func (s *Service) Post(ctx context.Context, sessionID string, kind guardv1.ChatMessageKind, text string) (_ *guardv1.PostChatMessageResponse, err error) {
	defer store.Faulted(&err, "chat message")
	switch {
	case strings.TrimSpace(text) == "":
		return nil, fault.New(fault.Invalid, "text: required")
	case utf8.RuneCountInString(text) > MaxTextChars:
		return nil, fault.New(fault.Invalid, "text: at most %d characters", MaxTextChars)
	case strings.ContainsRune(text, 0) || !utf8.ValidString(text):
		return nil, fault.New(fault.Invalid, "text: must be valid UTF-8 without NUL characters")
	}
	if kind == guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_UNSPECIFIED {
		kind = guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_REPLY
	}
	kindName, err := enumword.Word(kind)
	if err != nil {
		return nil, fault.New(fault.Invalid, "kind: want REPLY or NOTICE")
	}
	resp := &guardv1.PostChatMessageResponse{}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, writeLockKey); err != nil {
			return fmt.Errorf("chat outbox lock: %w", err)
		}
		err := tx.QueryRow(ctx, `INSERT INTO chat_outbox (channel_type, platform_id, messaging_group_id, session_id, agent_group_id, kind, text)
			SELECT mg.channel_type, mg.platform_id, mg.id, s.id, s.agent_group_id, $2, $3
			  FROM sessions s JOIN messaging_groups mg ON mg.id = s.messaging_group_id
			 WHERE s.id = $1
			RETURNING cursor, channel_type, platform_id`, sessionID, kindName, text).
			Scan(&resp.Cursor, &resp.ChannelType, &resp.PlatformId)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.New(fault.Precondition, "session %s has no chat to reply to", sessionID)
		}
		if err != nil {
			return fmt.Errorf("queue chat message: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Follow sends every message of channelType after the cursor, in order,
// then waits for more until ctx ends.
func (s *Service) Follow(ctx context.Context, channelType string, after int64, send func(*guardv1.WatchChatOutboxResponse) error) (err error) {
	defer store.Faulted(&err, "chat outbox")
	if strings.TrimSpace(channelType) == "" {
		return fault.New(fault.Invalid, "channel_type: required")
	}
	if after < 0 {
		return fault.New(fault.Invalid, "after_cursor: must not be negative")
	}
	t := time.NewTicker(s.Poll)
	defer t.Stop()
	for {
		batch, err := s.read(ctx, channelType, after)
		if err != nil {
			return err
		}
		for _, m := range batch {
			if err := send(m); err != nil {
				return err
			}
			after = m.GetCursor()
		}
		if len(batch) == readLimit {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

const readLimit = 100

func (s *Service) read(ctx context.Context, channelType string, after int64) ([]*guardv1.WatchChatOutboxResponse, error) {
	rows, err := s.pool.Query(ctx, `SELECT cursor, channel_type, platform_id, COALESCE(messaging_group_id, ''),
			session_id, agent_group_id, kind, text, created_at
		FROM chat_outbox WHERE channel_type = $1 AND cursor > $2 ORDER BY cursor LIMIT $3`, channelType, after, readLimit)
	if err != nil {
		return nil, fmt.Errorf("read chat outbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*guardv1.WatchChatOutboxResponse, error) {
		m := &guardv1.WatchChatOutboxResponse{}
		var kind string
		var at time.Time
		if err := r.Scan(&m.Cursor, &m.ChannelType, &m.PlatformId, &m.MessagingGroupId, &m.SessionId, &m.AgentGroupId, &kind, &m.Text, &at); err != nil {
			return nil, err
		}
		var err error
		if m.Kind, err = enumword.Parse[guardv1.ChatMessageKind](kind); err != nil || m.Kind == 0 {
			return nil, fmt.Errorf("chat message %d: kind %q: %v", m.Cursor, kind, err)
		}
		m.CreatedAt = timestamppb.New(at)
		return m, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chat outbox: %w", err)
	}
	return out, nil
}
