package resources

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

const messagingGroupColumns = `m.id, m.channel_type, m.platform_id, m.name, m.is_group, m.unknown_sender_policy, m.denied_at IS NOT NULL, m.created_at`

func scanMessagingGroup(row pgx.Row) (*guardv1.MessagingGroup, error) {
	var (
		m       guardv1.MessagingGroup
		policy  string
		created time.Time
	)
	if err := row.Scan(&m.Id, &m.ChannelType, &m.PlatformId, &m.Name, &m.IsGroup, &policy, &m.Denied, &created); err != nil {
		return nil, err
	}
	var err error
	if m.UnknownSenderPolicy, err = enumFromColumn[guardv1.SenderPolicy]("unknown_sender_policy", policy); err != nil {
		return nil, fmt.Errorf("messaging group %s: %w", m.Id, err)
	}
	m.CreatedAt = ts(created)
	return &m, nil
}

// A restricted viewer sees the chats wired to its groups.
const messagingGroupVisible = `($1 OR EXISTS (SELECT 1 FROM messaging_group_agents w WHERE w.messaging_group_id = m.id AND w.agent_group_id = ANY($2)))`

// ChatVisible says whether a viewer who reads the given groups (not all)
// sees the chat: the read rule of the chat listings above, for callers
// outside this package (a user's dry run).
func ChatVisible(ctx context.Context, q store.Querier, groups []string, chat string) (bool, error) {
	if groups == nil {
		groups = []string{}
	}
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messaging_groups m WHERE m.id = $3 AND `+messagingGroupVisible+`)`,
		false, groups, chat).Scan(&ok)
	return ok, err
}

// ChatChannel is the channel type of a chat; found false when there is no
// such chat.
func ChatChannel(ctx context.Context, q store.Querier, chat string) (channel string, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT channel_type FROM messaging_groups WHERE id = $1`, chat).Scan(&channel)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return channel, err == nil, store.Fault("messaging group", err)
}

// ListMessagingGroups lists chats the caller may see.
func (s *Service) ListMessagingGroups(ctx context.Context, req *guardv1.ListMessagingGroupsRequest) (_ *guardv1.ListMessagingGroupsResponse, err error) {
	defer store.Faulted(&err, "messaging groups")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (channel_type, platform_id: unique), bound to the viewer.
	filter := paging.Filter("messaging_groups", v.all, v.groups)
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterType, afterPlatform := "", ""
	if cur != nil {
		afterType, afterPlatform = cur.Key, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+messagingGroupColumns+` FROM messaging_groups m WHERE `+messagingGroupVisible+`
		AND ($4 = '' OR (m.channel_type, m.platform_id) > ($3, $4))
		ORDER BY m.channel_type, m.platform_id LIMIT $5`, v.all, v.groups, afterType, afterPlatform, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListMessagingGroupsResponse{}
	for rows.Next() {
		if len(out.MessagingGroups) == limit {
			// One row past the page: there is a next one.
			last := out.MessagingGroups[limit-1]
			out.NextPageToken = paging.NextKey(last.GetChannelType(), last.GetPlatformId(), filter)
			break
		}
		m, err := scanMessagingGroup(rows)
		if err != nil {
			return nil, err
		}
		out.MessagingGroups = append(out.MessagingGroups, m)
	}
	return out, rows.Err()
}

// GetMessagingGroup reads a chat.
func (s *Service) GetMessagingGroup(ctx context.Context, req *guardv1.GetMessagingGroupRequest) (_ *guardv1.GetMessagingGroupResponse, err error) {
	defer store.Faulted(&err, "messaging group")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	m, err := scanMessagingGroup(s.pool.QueryRow(ctx, `SELECT `+messagingGroupColumns+` FROM messaging_groups m WHERE `+
		messagingGroupVisible+` AND m.id = $3`, v.all, v.groups, req.GetId()))
	if store.IsNoRows(err) {
		return nil, notFound("messaging group %q not found", req.GetId())
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.GetMessagingGroupResponse{MessagingGroup: m}, nil
}

// CreateMessagingGroup registers a chat; (channel_type, platform_id) is unique.
func (s *Service) CreateMessagingGroup(ctx context.Context, req *guardv1.CreateMessagingGroupRequest) (_ *guardv1.CreateMessagingGroupResponse, err error) {
	defer store.Faulted(&err, "messaging group")
	policy, err := checkCreateMessagingGroup(req)
	if err != nil {
		return nil, err
	}
	m, err := scanMessagingGroup(s.pool.QueryRow(ctx, `INSERT INTO messaging_groups AS m (id, channel_type, platform_id, name, is_group, unknown_sender_policy)
		VALUES ($1, $2, $3, $4, $5, COALESCE(NULLIF($6, ''), 'strict')) RETURNING `+messagingGroupColumns,
		store.NewID("mg_", 8), req.GetChannelType(), req.GetPlatformId(), req.GetName(), req.GetIsGroup(), policy))
	if err != nil {
		return nil, err
	}
	return &guardv1.CreateMessagingGroupResponse{MessagingGroup: m}, nil
}

// UpdateMessagingGroup changes a chat's name or sender policy (unset = unchanged).
func (s *Service) UpdateMessagingGroup(ctx context.Context, req *guardv1.UpdateMessagingGroupRequest) (_ *guardv1.UpdateMessagingGroupResponse, err error) {
	defer store.Faulted(&err, "messaging group")
	policy, err := checkUpdateMessagingGroup(req)
	if err != nil {
		return nil, err
	}
	m, err := scanMessagingGroup(s.pool.QueryRow(ctx, `UPDATE messaging_groups AS m SET
		name = COALESCE(NULLIF($2, ''), name), unknown_sender_policy = COALESCE(NULLIF($3, ''), unknown_sender_policy)
		WHERE id = $1 RETURNING `+messagingGroupColumns, req.GetId(), req.GetName(), policy))
	if store.IsNoRows(err) {
		return nil, notFound("messaging group %q not found", req.GetId())
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.UpdateMessagingGroupResponse{MessagingGroup: m}, nil
}

// DeleteMessagingGroup deletes a chat; its wirings, destinations and pending
// registration go with it (foreign keys), sessions keep running unwired.
func (s *Service) DeleteMessagingGroup(ctx context.Context, req *guardv1.DeleteMessagingGroupRequest) (_ *guardv1.DeleteMessagingGroupResponse, err error) {
	defer store.Faulted(&err, "messaging group")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM messaging_groups WHERE id = $1`, req.GetId())
	if err := affected(tag, err, "messaging group %q not found", req.GetId()); err != nil {
		return nil, err
	}
	return &guardv1.DeleteMessagingGroupResponse{}, nil
}

// Chat is a messaging group as inbound routing reads it.
type Chat struct {
	ID       string
	Name     string
	Policy   string // unknown_sender_policy
	Denied   bool
	IsGroup  bool
	Channel  string
	Platform string
}

// FindOrCreateChatTx is the chat (channel type, platform id), created with
// name and isGroup when it is new (with the schema's default sender
// policy, strict); an existing chat is returned as it is.
func FindOrCreateChatTx(ctx context.Context, q store.Querier, channelType, platformID, name string, isGroup bool) (Chat, error) {
	var c Chat
	err := q.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (channel_type, platform_id) DO NOTHING
			RETURNING id, name, unknown_sender_policy, denied_at IS NOT NULL, is_group, channel_type, platform_id)
		SELECT * FROM ins
		UNION ALL
		SELECT id, name, unknown_sender_policy, denied_at IS NOT NULL, is_group, channel_type, platform_id
		  FROM messaging_groups WHERE channel_type = $2 AND platform_id = $3
		LIMIT 1`,
		store.NewID("mg_", 10), channelType, platformID, name, isGroup,
	).Scan(&c.ID, &c.Name, &c.Policy, &c.Denied, &c.IsGroup, &c.Channel, &c.Platform)
	if err != nil {
		return c, fmt.Errorf("resolve messaging group %s/%s: %w", channelType, platformID, err)
	}
	return c, nil
}

// DenyChatTx remembers the chat as denied (its messages are dropped; the
// first denial's time is kept).
func DenyChatTx(ctx context.Context, q store.Querier, mgID string) error {
	if _, err := q.Exec(ctx, `UPDATE messaging_groups SET denied_at = COALESCE(denied_at, now()) WHERE id = $1`, mgID); err != nil {
		return fmt.Errorf("deny channel %s: %w", mgID, err)
	}
	return nil
}
