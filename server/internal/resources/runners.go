package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

// ListRunners lists a page of runners (by id) with their lease: live means the lease has not
// expired (by the database clock, the one every replica shares), sessions
// counts the active sessions each one hosts.
func (s *Service) ListRunners(ctx context.Context, req *guardv1.ListRunnersRequest) (_ *guardv1.ListRunnersResponse, err error) {
	defer store.Faulted(&err, "runners")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if err := v.requireAll("runners"); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging on id.
	filter := paging.Filter("runners")
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterID := ""
	if cur != nil {
		afterID = cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT r.id, r.host, r.version, r.capabilities, r.labels, r.delivery_actions,
		r.lease_expires_at, r.lease_expires_at > now(), r.registered_at,
		(SELECT count(*) FROM sessions s WHERE s.runner_id = r.id AND s.status = 'active')
		FROM runners r WHERE r.id > $1 ORDER BY r.id LIMIT $2`, afterID, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListRunnersResponse{}
	for rows.Next() {
		if len(out.Runners) == limit {
			// One row past the page: there is a next one.
			out.NextPageToken = paging.NextKey("", out.Runners[limit-1].GetId(), filter)
			break
		}
		var (
			r                 guardv1.Runner
			labels, actions   []byte
			lease, registered time.Time
			sessions          int64
		)
		if err := rows.Scan(&r.Id, &r.Host, &r.Version, &r.Capabilities, &labels, &actions, &lease, &r.Live, &registered, &sessions); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(labels, &r.Labels); err != nil {
			return nil, fmt.Errorf("runner %s labels: %w", r.Id, err)
		}
		var decls []struct {
			Name          string `json:"name"`
			CatalogAction string `json:"catalog_action"`
		}
		if err := json.Unmarshal(actions, &decls); err != nil {
			return nil, fmt.Errorf("runner %s delivery actions: %w", r.Id, err)
		}
		for _, d := range decls {
			r.DeliveryActions = append(r.DeliveryActions, &guardv1.DeliveryActionDecl{Name: d.Name, CatalogAction: d.CatalogAction})
		}
		r.LeaseExpiresAt, r.RegisteredAt, r.Sessions = ts(lease), ts(registered), int32(sessions)
		out.Runners = append(out.Runners, &r)
	}
	return out, rows.Err()
}
