package resources

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

func scanDestination(row pgx.Row) (*guardv1.Destination, error) {
	var d guardv1.Destination
	err := row.Scan(&d.Group, &d.Name, &d.TargetGroup, &d.TargetMessagingGroup)
	return &d, err
}

const destinationColumns = `agent_group_id, name, COALESCE(target_agent_group_id, ''), COALESCE(target_messaging_group_id, '')`

// ListDestinations lists a group's destinations, by name.
func (s *Service) ListDestinations(ctx context.Context, req *guardv1.ListDestinationsRequest) (_ *guardv1.ListDestinationsResponse, err error) {
	defer store.Faulted(&err, "destinations")
	if err := s.visibleGroup(ctx, req.GetGroup()); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging on name (unique in a group), bound to the group.
	filter := paging.Filter("destinations", req.GetGroup())
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterName := ""
	if cur != nil {
		afterName = cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+destinationColumns+` FROM agent_destinations
		WHERE agent_group_id = $1 AND name > $2 ORDER BY name LIMIT $3`, req.GetGroup(), afterName, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListDestinationsResponse{}
	for rows.Next() {
		if len(out.Destinations) == limit {
			// One row past the page: there is a next one.
			out.NextPageToken = paging.NextKey("", out.Destinations[limit-1].GetName(), filter)
			break
		}
		d, err := scanDestination(rows)
		if err != nil {
			return nil, err
		}
		out.Destinations = append(out.Destinations, d)
	}
	return out, rows.Err()
}

// AddDestination lets a group message exactly one target: another agent
// group or a chat. Unknown groups or targets are NotFound (foreign keys).
func (s *Service) AddDestination(ctx context.Context, req *guardv1.AddDestinationRequest) (_ *guardv1.AddDestinationResponse, err error) {
	defer store.Faulted(&err, "destination")
	if err := checkAddDestination(req); err != nil {
		return nil, err
	}
	d, err := scanDestination(s.pool.QueryRow(ctx, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id, target_messaging_group_id)
		VALUES ($1, $2, NULLIF($3, ''), NULLIF($4, '')) RETURNING `+destinationColumns,
		req.GetGroup(), req.GetName(), req.GetTargetGroup(), req.GetTargetMessagingGroup()))
	if err != nil {
		return nil, err
	}
	return &guardv1.AddDestinationResponse{Destination: d}, nil
}

// RemoveDestination revokes a destination by name.
func (s *Service) RemoveDestination(ctx context.Context, req *guardv1.RemoveDestinationRequest) (_ *guardv1.RemoveDestinationResponse, err error) {
	defer store.Faulted(&err, "destination")
	if err := checkGroupAndName(req.GetGroup(), req.GetName()); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM agent_destinations WHERE agent_group_id = $1 AND name = $2`, req.GetGroup(), req.GetName())
	if err := affected(tag, err, "group %q has no destination %q", req.GetGroup(), req.GetName()); err != nil {
		return nil, err
	}
	return &guardv1.RemoveDestinationResponse{}, nil
}

// visibleGroup checks a required group argument of a per-group listing:
// empty is InvalidArgument, unknown or invisible to the caller NotFound.
func (s *Service) visibleGroup(ctx context.Context, group string) error {
	if err := required("group", group); err != nil {
		return err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_groups WHERE id = $1)`, group).Scan(&exists); err != nil {
		return err
	}
	if !exists || !v.sees(group) {
		return notFound("group %q not found", group)
	}
	return nil
}

// LinkChildTx gives a parent group and the child it created a destination
// each: the parent reaches the child as name, the child its parent as
// "parent" (an approved create_agent).
func LinkChildTx(ctx context.Context, tx pgx.Tx, parent, name, child string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ($1, $2, $3), ($3, 'parent', $1)`,
		parent, name, child); err != nil {
		return fmt.Errorf("create the destinations of %s and %s: %w", parent, child, err)
	}
	return nil
}

// SessionDestinationsTx is a group's agent destinations as its runner gives
// them to its agent: each local name, the target group and its name (no
// caller scoping: the runner's own read for a session it hosts).
func SessionDestinationsTx(ctx context.Context, q store.Querier, group string) ([]*guardv1.SessionDestination, error) {
	rows, err := q.Query(ctx, `SELECT d.name, d.target_agent_group_id, g.name FROM agent_destinations d
		JOIN agent_groups g ON g.id = d.target_agent_group_id
		WHERE d.agent_group_id = $1 ORDER BY d.name`, group)
	if err != nil {
		return nil, fmt.Errorf("read the destinations of %s: %w", group, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*guardv1.SessionDestination, error) {
		d := &guardv1.SessionDestination{}
		return d, r.Scan(&d.Name, &d.TargetGroup, &d.TargetGroupName)
	})
}
