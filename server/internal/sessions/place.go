package sessions

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/placement"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// PickRunnerTx is the least-loaded live runner matching the pin ("" when
// none).
func PickRunnerTx(ctx context.Context, q store.Querier, pinnedHost string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `
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

// AssignTx moves session id from owner ("" = unassigned) to runner, only
// if the owner is still the owner and holds no live lease (one conditional
// UPDATE: concurrent replicas never double-move; moved is false when
// another won). Unacked pushes follow the session, after the row is
// updated; the new owner gets a StartSession push — after a notice telling
// the agent it moved, when it ran on another runner — and the history a
// session_moved notice.
func AssignTx(ctx context.Context, tx pgx.Tx, id, owner, runner string) (moved bool, err error) {
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
	if err := pushes.FollowSessionTx(ctx, tx, id, runner); err != nil {
		return false, err
	}
	if owner != "" { // it ran elsewhere: the agent is told, before it starts here
		if _, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Notify{Notify: MovedNotice(owner, runner)}}); err != nil {
			return false, err
		}
	}
	if _, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		return false, err
	}
	if err := EventTx(ctx, tx, id, "in", "notice", map[string]any{"event": "session_moved", "from_runner": owner, "to_runner": runner}); err != nil {
		return false, err
	}
	return true, nil
}

// UnplaceTx takes the active sessions that are no longer placeable where
// they are (of one group, or on one runner; "" = any) off their runner,
// with their pending pushes: the old runner can no longer act for them, and
// the lease sweep places them again on a runner the pin matches. It runs
// when a group is re-pinned and when a runner registers a narrower
// identity, and returns the sessions it took off.
func UnplaceTx(ctx context.Context, q store.Querier, groupID, runnerID string) ([]string, error) {
	rows, err := q.Query(ctx, `
		UPDATE sessions s SET runner_id = NULL
		FROM agent_groups g, runners r
		WHERE g.id = s.agent_group_id AND r.id = s.runner_id AND s.status = 'active'
		  AND ($1 = '' OR s.agent_group_id = $1) AND ($2 = '' OR s.runner_id = $2)
		  AND NOT `+placement.RunnerMatchesSQL("g.pinned_host")+`
		RETURNING s.id`, groupID, runnerID)
	if err != nil {
		return nil, fmt.Errorf("unplace sessions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("unplace sessions: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if err := pushes.UnassignTx(ctx, q, ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// MovedNotice tells a moved session's agent where it is now and what did
// not come with it: the runner's data directory (its workspace) stays on
// the old host unless the runners share it (deploy/README.md, "A session
// that moves"); what was approved and applied stays applied.
func MovedNotice(from, to string) *guardv1.NotifyAgent {
	return &guardv1.NotifyAgent{Kind: guardv1.NoticeKind_NOTICE_KIND_INFO, Text: fmt.Sprintf(
		"This session moved from runner %s to runner %s (%s stopped renewing its lease). Your workspace moved only if "+
			"the runners share their data directory: files you wrote before may be missing. Actions approved and "+
			"applied before the move stay applied — check what was done before doing it again.", from, to, from)}
}
