// Package sessions owns the sessions and session_events tables: a session
// row from its creation to its deletion — opened for a group (and chat),
// placed on a runner, moved off a dead one or one its group's pin no
// longer matches, touched by each message, deleted with its group — and
// the session's history. Every write of either table is a function here,
// taking the caller's transaction; what a move does to the session's
// pushes is pushes' (FollowSessionTx, UnassignTx), called in the same
// transaction after the session row is updated: pushes.EnqueueTx reads
// the row FOR SHARE, so a push and a move serialize on it.
//
// Where a session may run is placement's: placement.RunnerMatchesSQL is
// the one pin predicate every placement here uses.
//
// It owns sessions and session_events: a session row from creation to
// deletion — opened (FindOrOpenTx, CreateTx under LockGroupTx), moved
// (AssignTx: the conditional UPDATE, then its pushes re-targeted, a
// StartSession push, a session_moved event), taken off runners a re-pin or a
// narrowing no longer matches (UnplaceTx), touched, deleted with its group
// (DeleteGroupTx) — and its history (EventTx). Other domains read a session
// through it where a rule depends on one (OriginTx, RunnerOf).
package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// NewID makes a session id.
func NewID() string { return store.NewID("sess_", 10) }

// LockGroupTx serializes the opening of a group's sessions until the
// transaction ends, so concurrent first messages share one session.
func LockGroupTx(ctx context.Context, q store.Querier, groupID string) error {
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('clawguard_group_sessions:' || $1))`, groupID); err != nil {
		return fmt.Errorf("lock group sessions: %w", err)
	}
	return nil
}

// ActiveTx finds the active session of (group, messaging group; "" = none)
// and its owner ("" = unassigned); ownerLive says whether the owner holds
// a live lease. id is "" when there is none.
func ActiveTx(ctx context.Context, q store.Querier, groupID, messagingGroupID string) (id, owner string, ownerLive bool, err error) {
	err = q.QueryRow(ctx, `
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

// CreateTx creates an active session of the group (for the chat
// messagingGroupID, "" = none) on runner ("" = unassigned: its pushes
// wait, and the lease sweep places it) and returns its id.
func CreateTx(ctx context.Context, q store.Querier, groupID, messagingGroupID, runner string) (string, error) {
	id := NewID()
	_, err := q.Exec(ctx, `INSERT INTO sessions (id, agent_group_id, messaging_group_id, runner_id) VALUES ($1, $2, NULLIF($3, ''), NULLIF($4, ''))`,
		id, groupID, messagingGroupID, runner)
	if err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	return id, nil
}

// FindOrOpenTx returns the active session of a group (any runner; a push
// to it follows the session wherever it goes), opening one on the
// least-loaded live runner that matches the group's pin when there is
// none, with a StartSession push. With no eligible runner the session is
// created unassigned: its pushes wait, and the lease sweep places it when
// a runner appears. Used by a2a.send and by inbound routing.
func FindOrOpenTx(ctx context.Context, tx pgx.Tx, groupID, messagingGroupID string) (string, error) {
	if err := LockGroupTx(ctx, tx, groupID); err != nil {
		return "", err
	}
	id, _, _, err := ActiveTx(ctx, tx, groupID, messagingGroupID)
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
	runner, err := PickRunnerTx(ctx, tx, pinned)
	if err != nil {
		return "", err
	}
	if id, err = CreateTx(ctx, tx, groupID, messagingGroupID, runner); err != nil {
		return "", err
	}
	if runner != "" {
		if _, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
			return "", err
		}
	}
	return id, nil
}

// ActiveRunnerTx is the runner of an active session ("" = unassigned);
// an error wrapping pgx.ErrNoRows when no active session has the id.
func ActiveRunnerTx(ctx context.Context, q store.Querier, id string) (string, error) {
	var runner string
	if err := q.QueryRow(ctx, `SELECT COALESCE(runner_id, '') FROM sessions WHERE id = $1 AND status = 'active'`, id).Scan(&runner); err != nil {
		return "", fmt.Errorf("read session %s: %w", id, err)
	}
	return runner, nil
}

// ReadTx reads a session.
func ReadTx(ctx context.Context, q store.Querier, id string) (*guardv1.Session, error) {
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

// Group is the agent group of a session; found false when there is no
// such session.
func Group(ctx context.Context, q store.Querier, sessionID string) (group string, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT agent_group_id FROM sessions WHERE id = $1`, sessionID).Scan(&group)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return group, err == nil, store.Fault("session", err)
}

// OriginTx is where a session's requests come from: its group, and the
// channel type of the chat it serves ("" when none). An error wrapping
// pgx.ErrNoRows when there is no such session.
func OriginTx(ctx context.Context, q store.Querier, id string) (group, channelType string, err error) {
	err = q.QueryRow(ctx, `SELECT s.agent_group_id, COALESCE(mg.channel_type, '')
			FROM sessions s LEFT JOIN messaging_groups mg ON mg.id = s.messaging_group_id
			WHERE s.id = $1`, id).Scan(&group, &channelType)
	return group, channelType, err
}

// RunnerOf is the runner a session is placed on ("" when none); found
// false when there is no such session.
func RunnerOf(ctx context.Context, q store.Querier, id string) (runner string, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT COALESCE(runner_id, '') FROM sessions WHERE id = $1`, id).Scan(&runner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return runner, err == nil, err
}

// DeleteGroupTx deletes every session of a group (their events and pushes
// go with them: foreign keys) and says how many went.
func DeleteGroupTx(ctx context.Context, q store.Querier, groupID string) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM sessions WHERE agent_group_id = $1`, groupID)
	if err != nil {
		return 0, fmt.Errorf("delete sessions of %s: %w", groupID, err)
	}
	return tag.RowsAffected(), nil
}
