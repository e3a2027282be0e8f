package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/placement"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/sessions"
	"github.com/clawguard/clawguard/server/internal/store"
)

// OpenSession opens (or returns the existing active) session of a group on
// the calling runner. The runner must hold a live lease, and the group's
// pin must match the identity it registered with (its token's host and
// labels): a group the server would not place on it is PermissionDenied,
// and so is a session placed on another live runner. An active session of
// a dead (or no) runner is taken over, with its unacknowledged pushes.
// The group is named by its id or its name (a runner's --group takes
// either). The answer carries the group with its container config, read in the same
// transaction (the runner starts the agent with it, whatever the cli_scope).
func (s *Service) OpenSession(ctx context.Context, runnerID, groupID, messagingGroupID string) (_ *guardv1.OpenSessionResponse, err error) {
	defer store.Faulted(&err, "session")
	if groupID == "" {
		return nil, fault.New(fault.Invalid, "agent_group_id: required")
	}
	if groupID, err = s.groupByIDOrName(ctx, groupID); err != nil {
		return nil, err
	}
	var out *guardv1.OpenSessionResponse
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := sessions.LockGroupTx(ctx, tx, groupID); err != nil {
			return err
		}
		var live bool
		err := tx.QueryRow(ctx, `SELECT lease_expires_at > now() FROM runners WHERE id = $1`, runnerID).Scan(&live)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
			return fault.New(fault.Precondition, "runner %q holds no live lease; register first", runnerID)
		}
		if err != nil {
			return fmt.Errorf("read runner: %w", err)
		}
		var (
			pinned    string
			placeable bool
		)
		err = tx.QueryRow(ctx, `SELECT g.pinned_host, `+placement.RunnerMatchesSQL("g.pinned_host")+`
			FROM agent_groups g, runners r WHERE g.id = $1 AND r.id = $2`, groupID, runnerID).Scan(&pinned, &placeable)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.New(fault.NotFound, "agent group %q not found", groupID)
		}
		if err != nil {
			return fmt.Errorf("read group: %w", err)
		}
		if !placeable {
			s.log.InfoContext(ctx, "open session refused: group not placeable on runner", "runner", runnerID, "group", groupID, "pinned_host", pinned)
			return fault.New(fault.Denied, "agent group %q is pinned to %q, which runner %q's token does not carry", groupID, pinned, runnerID)
		}
		id, owner, ownerLive, err := sessions.ActiveTx(ctx, tx, groupID, messagingGroupID)
		if err != nil {
			return err
		}
		switch {
		case id == "":
			if id, err = sessions.CreateTx(ctx, tx, groupID, messagingGroupID, runnerID); err != nil {
				return err
			}
		case owner == runnerID:
		case ownerLive:
			s.log.InfoContext(ctx, "open session refused: placed on another live runner", "runner", runnerID, "group", groupID, "session", id)
			return fault.New(fault.Denied, "session %q of group %q is placed on another live runner", id, groupID)
		default:
			moved, err := sessions.AssignTx(ctx, tx, id, owner, runnerID)
			if err != nil {
				return err
			}
			if !moved {
				// Another mover (a replica's lease sweep) won the row. If it
				// gave the session to this runner, that is what was asked.
				if now, err := sessions.ActiveRunnerTx(ctx, tx, id); err != nil || now != runnerID {
					return fault.New(fault.Aborted, "session %q changed owner concurrently; retry", id)
				}
			}
		}
		sess, err := sessions.ReadTx(ctx, tx, id)
		if err != nil {
			return err
		}
		g, err := resources.ReadGroup(ctx, tx, groupID)
		if err != nil {
			return err
		}
		out = &guardv1.OpenSessionResponse{Session: sess, Group: g}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.hub.wake(runnerID)
	return out, nil
}

// groupByIDOrName is the id of the group named by its id or its name (a
// runner's --group takes either; an id wins over a name); what is neither
// is returned as it is, for the caller's NotFound.
func (s *Service) groupByIDOrName(ctx context.Context, idOrName string) (string, error) {
	id := idOrName
	err := s.pool.QueryRow(ctx, `SELECT id FROM agent_groups WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1`, idOrName).Scan(&id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("find group: %w", err)
	}
	return id, nil
}
