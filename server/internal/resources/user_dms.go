package resources

import (
	"context"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

func scanDM(row pgx.Row) (*guardv1.UserDm, error) {
	var d guardv1.UserDm
	err := row.Scan(&d.UserId, &d.ChannelType, &d.Address)
	return &d, err
}

// ListUserDms lists DM addresses; a user who is not an owner or global
// admin sees only their own.
func (s *Service) ListUserDms(ctx context.Context, req *guardv1.ListUserDmsRequest) (_ *guardv1.ListUserDmsResponse, err error) {
	defer store.Faulted(&err, "user DMs")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if v.userID == "" {
		if err := v.requireAll("user DMs"); err != nil {
			return nil, err
		}
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (user_id, channel_type), bound to the filter and the viewer.
	filter := paging.Filter("user_dms", v.all, v.userID, req.GetUserId())
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterUser, afterType := "", ""
	if cur != nil {
		afterUser, afterType = cur.Key, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT user_id, channel_type, address FROM user_dms
		WHERE ($1 OR user_id = $2) AND ($3 = '' OR user_id = $3)
		  AND ($5 = '' OR (user_id, channel_type) > ($4, $5))
		ORDER BY user_id, channel_type LIMIT $6`, v.all, v.userID, req.GetUserId(), afterUser, afterType, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListUserDmsResponse{}
	for rows.Next() {
		if len(out.Dms) == limit {
			// One row past the page: there is a next one.
			last := out.Dms[limit-1]
			out.NextPageToken = paging.NextKey(last.GetUserId(), last.GetChannelType(), filter)
			break
		}
		d, err := scanDM(rows)
		if err != nil {
			return nil, err
		}
		out.Dms = append(out.Dms, d)
	}
	return out, rows.Err()
}

// SetUserDm records (or replaces) where a user's cards go on a channel type.
func (s *Service) SetUserDm(ctx context.Context, req *guardv1.SetUserDmRequest) (_ *guardv1.SetUserDmResponse, err error) {
	defer store.Faulted(&err, "user DM")
	if err := checkSetUserDm(req); err != nil {
		return nil, err
	}
	d, err := scanDM(s.pool.QueryRow(ctx, `INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, channel_type) DO UPDATE SET address = EXCLUDED.address
		RETURNING user_id, channel_type, address`, req.GetUserId(), req.GetChannelType(), req.GetAddress()))
	if err != nil {
		return nil, err
	}
	return &guardv1.SetUserDmResponse{Dm: d}, nil
}

// RemoveUserDm forgets a DM address.
func (s *Service) RemoveUserDm(ctx context.Context, req *guardv1.RemoveUserDmRequest) (_ *guardv1.RemoveUserDmResponse, err error) {
	defer store.Faulted(&err, "user DM")
	if err := checkRemoveUserDm(req); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM user_dms WHERE user_id = $1 AND channel_type = $2`, req.GetUserId(), req.GetChannelType())
	if err := affected(tag, err, "user %q has no DM on %q", req.GetUserId(), req.GetChannelType()); err != nil {
		return nil, err
	}
	return &guardv1.RemoveUserDmResponse{}, nil
}
