package resources

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

func scanMember(row pgx.Row) (*guardv1.Member, error) {
	var (
		m     guardv1.Member
		added time.Time
	)
	err := row.Scan(&m.Group, &m.UserId, &added)
	m.AddedAt = ts(added)
	return &m, err
}

// ListMembers lists a group's members, by user id.
func (s *Service) ListMembers(ctx context.Context, req *guardv1.ListMembersRequest) (_ *guardv1.ListMembersResponse, err error) {
	defer store.Faulted(&err, "members")
	if err := s.visibleGroup(ctx, req.GetGroup()); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging on user_id, bound to the group.
	filter := paging.Filter("members", req.GetGroup())
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterID := ""
	if cur != nil {
		afterID = cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT agent_group_id, user_id, added_at FROM agent_group_members
		WHERE agent_group_id = $1 AND user_id > $2 ORDER BY user_id LIMIT $3`, req.GetGroup(), afterID, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListMembersResponse{}
	for rows.Next() {
		if len(out.Members) == limit {
			// One row past the page: there is a next one.
			out.NextPageToken = paging.NextKey("", out.Members[limit-1].GetUserId(), filter)
			break
		}
		m, err := scanMember(rows)
		if err != nil {
			return nil, err
		}
		out.Members = append(out.Members, m)
	}
	return out, rows.Err()
}

// AddMember admits an existing user to an existing group.
func (s *Service) AddMember(ctx context.Context, req *guardv1.AddMemberRequest) (_ *guardv1.AddMemberResponse, err error) {
	defer store.Faulted(&err, "member")
	if err := checkMember(req.GetGroup(), req.GetUserId()); err != nil {
		return nil, err
	}
	m, err := scanMember(s.pool.QueryRow(ctx, `INSERT INTO agent_group_members (agent_group_id, user_id) VALUES ($1, $2)
		RETURNING agent_group_id, user_id, added_at`, req.GetGroup(), req.GetUserId()))
	if err != nil {
		return nil, err
	}
	return &guardv1.AddMemberResponse{Member: m}, nil
}

// RemoveMember removes a member.
func (s *Service) RemoveMember(ctx context.Context, req *guardv1.RemoveMemberRequest) (_ *guardv1.RemoveMemberResponse, err error) {
	defer store.Faulted(&err, "member")
	if err := checkMember(req.GetGroup(), req.GetUserId()); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM agent_group_members WHERE agent_group_id = $1 AND user_id = $2`, req.GetGroup(), req.GetUserId())
	if err := affected(tag, err, "user %q is not a member of group %q", req.GetUserId(), req.GetGroup()); err != nil {
		return nil, err
	}
	return &guardv1.RemoveMemberResponse{}, nil
}

// AddMemberTx makes user a member of the group (once: a member stays as
// they are). An unknown user is a foreign key violation.
func AddMemberTx(ctx context.Context, q store.Querier, groupID, user string) error {
	if _, err := q.Exec(ctx, `INSERT INTO agent_group_members (agent_group_id, user_id) VALUES ($1, $2)
		ON CONFLICT DO NOTHING`, groupID, user); err != nil {
		return fmt.Errorf("admit %s to %s: %w", user, groupID, err)
	}
	return nil
}

// AddKnownMemberTx is AddMemberTx for a user who may not exist: an
// unknown user is left out, no error.
func AddKnownMemberTx(ctx context.Context, q store.Querier, groupID, user string) error {
	if _, err := q.Exec(ctx, `INSERT INTO agent_group_members (agent_group_id, user_id)
		SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM users WHERE id = $2) ON CONFLICT DO NOTHING`,
		groupID, user); err != nil {
		return fmt.Errorf("admit %s to %s: %w", user, groupID, err)
	}
	return nil
}
