package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/placement"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/store"
)

// OpenSession opens (or returns the existing active) session of a group on
// the calling runner. The runner must hold a live lease, and the group's
// pin must match the identity it registered with (its token's host and
// labels): a group the server would not place on it is PermissionDenied,
// and so is a session placed on another live runner. An active session of
// a dead (or no) runner is taken over, with its unacknowledged pushes.
// The answer carries the group with its container config, read in the same
// transaction (the runner starts the agent with it, whatever the cli_scope).
func (s *Service) OpenSession(ctx context.Context, runnerID, groupID, messagingGroupID string) (_ *guardv1.OpenSessionResponse, err error) {
	defer store.Faulted(&err, "session")
	if groupID == "" {
		return nil, fault.New(fault.Invalid, "agent_group_id: required")
	}
	var out *guardv1.OpenSessionResponse
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('clawguard_group_sessions:' || $1))`, groupID); err != nil {
			return fmt.Errorf("lock group sessions: %w", err)
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
		id, owner, ownerLive, err := activeSessionTx(ctx, tx, groupID, messagingGroupID)
		if err != nil {
			return err
		}
		switch {
		case id == "":
			id = store.NewID("sess_", 10)
			_, err = tx.Exec(ctx, `INSERT INTO sessions (id, agent_group_id, messaging_group_id, runner_id) VALUES ($1, $2, NULLIF($3, ''), $4)`,
				id, groupID, messagingGroupID, runnerID)
			if err != nil {
				return fmt.Errorf("create session: %w", err)
			}
		case owner == runnerID:
		case ownerLive:
			s.log.InfoContext(ctx, "open session refused: placed on another live runner", "runner", runnerID, "group", groupID, "session", id)
			return fault.New(fault.Denied, "session %q of group %q is placed on another live runner", id, groupID)
		default:
			moved, err := assignSessionTx(ctx, tx, id, owner, runnerID)
			if err != nil {
				return err
			}
			if !moved {
				// Another mover (a replica's lease sweep) won the row. If it
				// gave the session to this runner, that is what was asked.
				var now string
				if err := tx.QueryRow(ctx, `SELECT COALESCE(runner_id, '') FROM sessions WHERE id = $1 AND status = 'active'`, id).Scan(&now); err != nil || now != runnerID {
					return fault.New(fault.Aborted, "session %q changed owner concurrently; retry", id)
				}
			}
		}
		sess, err := readSessionTx(ctx, tx, id)
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

// activeSessionTx finds the active session of (group, messaging group) and
// its owner; ownerLive says whether the owner holds a live lease.
func activeSessionTx(ctx context.Context, tx pgx.Tx, groupID, messagingGroupID string) (id, owner string, ownerLive bool, err error) {
	err = tx.QueryRow(ctx, `
		SELECT s.id, COALESCE(s.runner_id, ''), COALESCE(r.lease_expires_at > now(), false)
		FROM sessions s LEFT JOIN runners r ON r.id = s.runner_id
		WHERE s.agent_group_id = $1 AND s.messaging_group_id IS NOT DISTINCT FROM NULLIF($2, '') AND s.status = 'active'
		ORDER BY s.created_at LIMIT 1`, groupID, messagingGroupID).Scan(&id, &owner, &ownerLive)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("find active session: %w", err)
	}
	return id, owner, ownerLive, nil
}

// FindOrOpenSessionTx returns the active session of a group (any runner; a
// push to it follows the session wherever it goes), opening one on the
// least-loaded live runner that matches the group's pin when there is none.
// With no eligible runner the session is created unassigned: its pushes
// wait, and the lease sweep places it when a runner appears. Used by
// a2a.send and by inbound routing.
func FindOrOpenSessionTx(ctx context.Context, tx pgx.Tx, groupID, messagingGroupID string) (string, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('clawguard_group_sessions:' || $1))`, groupID); err != nil {
		return "", fmt.Errorf("lock group sessions: %w", err)
	}
	id, _, _, err := activeSessionTx(ctx, tx, groupID, messagingGroupID)
	if err != nil || id != "" {
		return id, err
	}
	var pinned string
	err = tx.QueryRow(ctx, `SELECT pinned_host FROM agent_groups WHERE id = $1`, groupID).Scan(&pinned)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fault.New(fault.NotFound, "agent group %q not found", groupID)
	}
	if err != nil {
		return "", fmt.Errorf("read group: %w", err)
	}
	runner, err := pickRunnerTx(ctx, tx, pinned)
	if err != nil {
		return "", err
	}
	id = store.NewID("sess_", 10)
	_, err = tx.Exec(ctx, `INSERT INTO sessions (id, agent_group_id, messaging_group_id, runner_id) VALUES ($1, $2, NULLIF($3, ''), NULLIF($4, ''))`,
		id, groupID, messagingGroupID, runner)
	if err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	if runner != "" {
		if _, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
			return "", err
		}
	}
	return id, nil
}

// pickRunnerTx is the least-loaded live runner matching the pin ("" when none).
func pickRunnerTx(ctx context.Context, tx pgx.Tx, pinnedHost string) (string, error) {
	var id string
	err := tx.QueryRow(ctx, `
		SELECT r.id FROM runners r
		WHERE r.lease_expires_at > now() AND `+placement.RunnerMatchesSQL("$1::text")+`
		ORDER BY (SELECT count(*) FROM sessions s WHERE s.runner_id = r.id AND s.status = 'active'), r.id
		LIMIT 1`, pinnedHost).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pick a runner: %w", err)
	}
	return id, nil
}

// assignSessionTx moves session id from owner ("" = unassigned) to runner,
// only if the owner is still the owner and holds no live lease (one
// conditional UPDATE: concurrent replicas never double-move). Unacked pushes
// follow the session; the new owner gets a StartSession push.
func assignSessionTx(ctx context.Context, tx pgx.Tx, id, owner, runner string) (bool, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE sessions s SET runner_id = $3
		WHERE s.id = $1 AND s.status = 'active' AND s.runner_id IS NOT DISTINCT FROM NULLIF($2, '')
		  AND NOT EXISTS (SELECT 1 FROM runners r WHERE r.id = s.runner_id AND r.lease_expires_at > now())`,
		id, owner, runner)
	if err != nil {
		return false, fmt.Errorf("reassign session %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE runner_pushes SET runner_id = $2 WHERE session_id = $1 AND acked_at IS NULL`, id, runner); err != nil {
		return false, fmt.Errorf("re-target pushes of session %s: %w", id, err)
	}
	if _, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		return false, err
	}
	if err := EventTx(ctx, tx, id, "in", "notice", map[string]any{"event": "session_moved", "from_runner": owner, "to_runner": runner}); err != nil {
		return false, err
	}
	return true, nil
}

func readSessionTx(ctx context.Context, q pgx.Tx, id string) (*guardv1.Session, error) {
	var (
		out           guardv1.Session
		mg, runner    string
		st            string
		created, last time.Time
	)
	err := q.QueryRow(ctx, `SELECT id, agent_group_id, COALESCE(messaging_group_id, ''), COALESCE(runner_id, ''), status, created_at, last_active_at
		FROM sessions WHERE id = $1`, id).Scan(&out.Id, &out.AgentGroupId, &mg, &runner, &st, &created, &last)
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	out.MessagingGroupId, out.RunnerId = mg, runner
	if out.Status, err = enumword.Parse[guardv1.SessionStatus](st); err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	out.CreatedAt, out.LastActiveAt = timestamppb.New(created), timestamppb.New(last)
	return &out, nil
}

// EventTx records a session event (the session's history).
func EventTx(ctx context.Context, tx pgx.Tx, sessionID, direction, kind string, body map[string]any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode session event: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO session_events (session_id, direction, kind, body) VALUES ($1, $2, $3, $4)`, sessionID, direction, kind, b); err != nil {
		return fmt.Errorf("record session event: %w", err)
	}
	return nil
}

// SessionGroup is the agent group of a session; found false when there is
// no such session.
func SessionGroup(ctx context.Context, q store.Querier, sessionID string) (group string, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT agent_group_id FROM sessions WHERE id = $1`, sessionID).Scan(&group)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return group, err == nil, store.Fault("session", err)
}
