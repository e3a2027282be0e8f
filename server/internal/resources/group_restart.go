package resources

import (
	"context"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// RestartGroup queues a restart for every active session of the group.
func (s *Service) RestartGroup(ctx context.Context, req *guardv1.RestartGroupRequest) (_ *guardv1.RestartGroupResponse, err error) {
	defer store.Faulted(&err, "group")
	if err := required("group", req.GetGroup()); err != nil {
		return nil, err
	}
	var n int
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		c, err := LockConfigTx(ctx, tx, req.GetGroup())
		if err != nil {
			return err
		}
		ids, err := pushes.RestartGroupTx(ctx, tx, req.GetGroup(), "restart requested", req.GetRebuildImage(), c.Version)
		n = len(ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.RestartGroupResponse{Sessions: int32(n)}, nil
}
