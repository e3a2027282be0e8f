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

func scanWiring(row pgx.Row) (*guardv1.Wiring, error) {
	var (
		w       guardv1.Wiring
		created time.Time
	)
	err := row.Scan(&w.Id, &w.MessagingGroup, &w.Group, &created)
	w.CreatedAt = ts(created)
	return &w, err
}

const wiringColumns = `id, messaging_group_id, agent_group_id, created_at`

// ListWirings lists wirings the caller may see, optionally of one group or chat.
func (s *Service) ListWirings(ctx context.Context, req *guardv1.ListWiringsRequest) (_ *guardv1.ListWiringsResponse, err error) {
	defer store.Faulted(&err, "wirings")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (created_at, id), bound to the filters and the viewer.
	filter := paging.Filter("wirings", v.all, v.groups, req.GetGroup(), req.GetMessagingGroup())
	cur, err := paging.Decode(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	var after *time.Time
	afterID := ""
	if cur != nil {
		after, afterID = &cur.At, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+wiringColumns+` FROM messaging_group_agents
		WHERE ($1 OR agent_group_id = ANY($2)) AND ($3 = '' OR agent_group_id = $3) AND ($4 = '' OR messaging_group_id = $4)
		  AND ($5::timestamptz IS NULL OR (created_at, id) > ($5, $6))
		ORDER BY created_at, id LIMIT $7`, v.all, v.groups, req.GetGroup(), req.GetMessagingGroup(), after, afterID, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListWiringsResponse{}
	for rows.Next() {
		if len(out.Wirings) == limit {
			// One row past the page: there is a next one.
			last := out.Wirings[limit-1]
			out.NextPageToken = paging.Next(last.GetCreatedAt().AsTime(), last.GetId(), filter)
			break
		}
		w, err := scanWiring(rows)
		if err != nil {
			return nil, err
		}
		out.Wirings = append(out.Wirings, w)
	}
	return out, rows.Err()
}

// CreateWiring wires an existing chat to an existing group (once).
func (s *Service) CreateWiring(ctx context.Context, req *guardv1.CreateWiringRequest) (_ *guardv1.CreateWiringResponse, err error) {
	defer store.Faulted(&err, "wiring")
	if err := checkCreateWiring(req); err != nil {
		return nil, err
	}
	w, err := scanWiring(s.pool.QueryRow(ctx, `INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id)
		VALUES ($1, $2, $3) RETURNING `+wiringColumns, store.NewID("wr_", 8), req.GetMessagingGroup(), req.GetGroup()))
	if err != nil {
		return nil, err
	}
	return &guardv1.CreateWiringResponse{Wiring: w}, nil
}

// DeleteWiring removes a wiring by id.
func (s *Service) DeleteWiring(ctx context.Context, req *guardv1.DeleteWiringRequest) (_ *guardv1.DeleteWiringResponse, err error) {
	defer store.Faulted(&err, "wiring")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM messaging_group_agents WHERE id = $1`, req.GetId())
	if err := affected(tag, err, "wiring %q not found", req.GetId()); err != nil {
		return nil, err
	}
	return &guardv1.DeleteWiringResponse{}, nil
}

// WireTx wires the chat to the group unless it is already (a registration
// approved on the chat's card). A group that does not exist is a foreign
// key violation (store.IsForeignKeyViolation).
func WireTx(ctx context.Context, q store.Querier, mgID, groupID string) error {
	if _, err := q.Exec(ctx, `INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id)
		VALUES ($1, $2, $3) ON CONFLICT (messaging_group_id, agent_group_id) DO NOTHING`,
		store.NewID("mga_", 10), mgID, groupID); err != nil {
		return fmt.Errorf("wire %s to %s: %w", mgID, groupID, err)
	}
	return nil
}
