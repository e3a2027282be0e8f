// Package pushes is the durable outbox from the server to runners: work is
// stored in runner_pushes (in the caller's transaction, so it commits with
// the change that caused it), NOTIFY wakes whichever replica holds the
// runner's stream, and a push stays until the runner acknowledges it. It
// owns runner_pushes: every write of the table is a function here (the
// stream's attempts and acks, a move's re-targeting).
//
// EnqueueTx runs in the caller's transaction, serialized with session moves
// on the session row (LockTargetSQL; QueueLockTarget reads the same lock in
// a caller's batch): a move re-targets with FollowSessionTx or UnassignTx
// after updating the row. The stream's side is Sending, Acked and Failed;
// RestartGroupTx restarts a group's active sessions.
package pushes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/wake"
)

// ErrNoSession is returned when the target session does not exist.
var ErrNoSession = errors.New("push target session not found")

// NewID makes a push id.
func NewID() string { return store.NewID("push_", 10) }

// RestartGroupTx queues a RestartContainer push (at config version version;
// rebuild: build the group image first) for every active session of the
// group, in the caller's transaction, and returns the push ids.
func RestartGroupTx(ctx context.Context, tx pgx.Tx, groupID, reason string, rebuild bool, version int64) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM sessions WHERE agent_group_id = $1 AND status = 'active' ORDER BY created_at, id`, groupID)
	if err != nil {
		return nil, fmt.Errorf("list active sessions of %s: %w", groupID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list active sessions of %s: %w", groupID, err)
	}
	pushIDs := make([]string, 0, len(ids))
	for _, id := range ids {
		pid, err := EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Restart{Restart: &guardv1.RestartContainer{
			Reason: reason, RebuildImage: rebuild, ConfigVersion: version,
		}}})
		if err != nil {
			return nil, err
		}
		pushIDs = append(pushIDs, pid)
	}
	return pushIDs, nil
}

// Notify queues a notice for a session's agent in a transaction of its own.
func Notify(ctx context.Context, pool store.TxBeginner, sessionID string, n *guardv1.NotifyAgent) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := EnqueueTx(ctx, tx, sessionID, &guardv1.Push{Body: &guardv1.Push_Notify{Notify: n}})
		return err
	})
}

// EnqueueTx stores a push for the runner that owns sessionID (which may be
// none right now: the push waits and follows the session when it is
// reassigned). p.Id, p.SessionId and p.AgentGroupId are filled in.
func EnqueueTx(ctx context.Context, tx pgx.Tx, sessionID string, p *guardv1.Push) (string, error) {
	var t Target
	err := tx.QueryRow(ctx, LockTargetSQL, sessionID).Scan(&t.RunnerID, &t.GroupID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: %s", ErrNoSession, sessionID)
	}
	if err != nil {
		return "", fmt.Errorf("look up session %s: %w", sessionID, err)
	}
	t.SessionID = sessionID
	sql, args, err := t.Insert(p)
	if err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return "", fmt.Errorf("store push: %w", err)
	}
	if t.RunnerID != nil {
		wake.RunnerPushes(ctx, *t.RunnerID) // a transaction begun with wake.KeyedTx notifies after commit
	}
	return p.Id, nil
}

// LockTargetSQL reads a session's runner and group ($1: the session id)
// FOR SHARE. The lock serializes a push with a move of the session (which
// updates this row, then re-targets unacked pushes): a move waits for the
// push to commit and carries it, or the push waits for the move and goes to
// the new runner — never to the old one. A caller may read it in a batch of
// its own (as a subquery for the id) and hand the row to Target.Insert.
const LockTargetSQL = `SELECT runner_id, agent_group_id FROM sessions WHERE id = $1 FOR SHARE`

// QueueLockTarget queues onto b the read of LockTargetSQL for the session
// that sessionQuery selects (a subquery of one column, its parameters
// args), so a caller reads it in a batch of its own; *t is set when b's
// results are read (nil when it selects no session).
func QueueLockTarget(b *pgx.Batch, t **Target, sessionQuery string, args ...any) {
	b.Queue(`SELECT runner_id, agent_group_id, id FROM sessions WHERE id = (`+sessionQuery+`) FOR SHARE`, args...).Query(func(rows pgx.Rows) error {
		targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Target, error) {
			var t Target
			return t, r.Scan(&t.RunnerID, &t.GroupID, &t.SessionID)
		})
		if err != nil {
			return fmt.Errorf("lock the push's session: %w", err)
		}
		if len(targets) > 0 {
			*t = &targets[0]
		}
		return nil
	})
}

// Target is a session read with LockTargetSQL in the transaction the push
// is stored in.
type Target struct {
	SessionID string
	RunnerID  *string // nil while no runner hosts the session
	GroupID   string
}

// Insert is the statement that stores p for t (p.Id, p.SessionId and
// p.AgentGroupId are filled in), to run in the transaction that locked t.
func (t Target) Insert(p *guardv1.Push) (string, []any, error) {
	if p.GetId() == "" {
		p.Id = NewID()
	}
	p.SessionId = t.SessionID
	p.AgentGroupId = t.GroupID
	body, err := proto.Marshal(p)
	if err != nil {
		return "", nil, fmt.Errorf("encode push: %w", err)
	}
	// A replay names its hold, so the reconciler can tell one in flight.
	return `INSERT INTO runner_pushes (id, runner_id, session_id, kind, body, hold_id) VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''))
		ON CONFLICT (id) DO NOTHING`, []any{p.Id, t.RunnerID, t.SessionID, Kind(p), body, p.GetReplay().GetHoldId()}, nil
}

// Kind is the runner_pushes.kind of a push.
func Kind(p *guardv1.Push) string {
	switch p.GetBody().(type) {
	case *guardv1.Push_Replay:
		return "replay"
	case *guardv1.Push_Deliver:
		return "deliver"
	case *guardv1.Push_Restart:
		return "restart"
	case *guardv1.Push_Notify:
		return "notify"
	case *guardv1.Push_Start:
		return "start"
	case *guardv1.Push_Stop:
		return "stop"
	}
	return "notify"
}

// FollowSessionTx re-targets the session's unacknowledged pushes to runner,
// its new owner. The mover calls it after updating the session row, which
// EnqueueTx reads FOR SHARE: a push stored meanwhile waited for the move
// and went to the new runner, or the move waited for it and carries it.
func FollowSessionTx(ctx context.Context, q store.Querier, sessionID, runner string) error {
	if _, err := q.Exec(ctx, `UPDATE runner_pushes SET runner_id = $2 WHERE session_id = $1 AND acked_at IS NULL`, sessionID, runner); err != nil {
		return fmt.Errorf("re-target pushes of session %s: %w", sessionID, err)
	}
	return nil
}

// UnassignTx takes the sessions' unacknowledged pushes off their runner
// (the sessions were just taken off it, their rows updated first): they
// wait, and follow the session when it is placed again.
func UnassignTx(ctx context.Context, q store.Querier, sessionIDs []string) error {
	if _, err := q.Exec(ctx, `UPDATE runner_pushes SET runner_id = NULL WHERE session_id = ANY($1) AND acked_at IS NULL`, sessionIDs); err != nil {
		return fmt.Errorf("unplace pushes: %w", err)
	}
	return nil
}

// Exists reports whether a push of this id is stored (acknowledged or
// not): a caller that makes ids from what it delivers tells a retry by it.
func Exists(ctx context.Context, q store.Querier, id string) (bool, error) {
	tag, err := q.Exec(ctx, `SELECT 1 FROM runner_pushes WHERE id = $1`, id)
	if err != nil {
		return false, fmt.Errorf("check earlier delivery: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Pending is the runner's unacknowledged pushes, oldest first, at most
// limit.
func Pending(ctx context.Context, q store.Querier, runnerID string, limit int) ([]*guardv1.Push, error) {
	rows, err := q.Query(ctx, `SELECT id, body, created_at FROM runner_pushes
		WHERE runner_id = $1 AND acked_at IS NULL ORDER BY created_at, seq LIMIT $2`, runnerID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*guardv1.Push, error) {
		var (
			id      string
			body    []byte
			created time.Time
		)
		if err := r.Scan(&id, &body, &created); err != nil {
			return nil, err
		}
		p := &guardv1.Push{}
		if err := proto.Unmarshal(body, p); err != nil {
			return nil, fmt.Errorf("decode push %s: %w", id, err)
		}
		p.Id = id
		p.CreatedAt = timestamppb.New(created)
		return p, nil
	})
}

// Sending counts one more attempt of each push, before it goes out:
// attempts is how often a push was sent. One push — the usual send, a
// wake-up's — is counted by key: Postgres plans id = ANY($1) afresh on
// every execution (its generic plan assumes ten ids, dearer than the one
// it is given), id = $1 once per connection.
//
// Committed without waiting for the WAL flush (store.AsyncWrite): a count
// lost in a crash only lets a push be sent once more than maxAttempts.
func Sending(ctx context.Context, pool *pgxpool.Pool, ids []string) error {
	if len(ids) == 1 {
		_, err := store.AsyncWrite(ctx, pool, `UPDATE runner_pushes SET attempts = attempts + 1 WHERE id = $1`, []any{ids[0]}, nil)
		return err
	}
	_, err := store.AsyncWrite(ctx, pool, `UPDATE runner_pushes SET attempts = attempts + 1 WHERE id = ANY($1)`, []any{ids}, nil)
	return err
}

// Acked records the runner's successful acks of pushes that are its own
// (a push moved to another runner meanwhile is left to that one) and not
// yet acknowledged.
//
// Committed without waiting for the WAL flush (store.AsyncWrite): an ack
// lost in a crash leaves its push pending, and it is sent again; a runner
// answers a push it already carried out by its id (a replay's grant is
// consumed once, a delivery is deduplicated), so nothing runs twice.
func Acked(ctx context.Context, pool *pgxpool.Pool, runnerID string, ids []string) error {
	_, err := store.AsyncWrite(ctx, pool, `UPDATE runner_pushes SET acked_at = now(), last_error = ''
			WHERE id = ANY($1) AND runner_id = $2 AND acked_at IS NULL`, []any{ids, runnerID}, nil)
	return err
}

// Failed records the runner's failure answer to a push of its own,
// pending: its error is kept and it stays pending, unless it was sent
// maxAttempts times already, when it is given up (acknowledged with the
// error). found is false for an unknown id, another runner's push or one
// already acknowledged (nothing is recorded).
func Failed(ctx context.Context, q store.Querier, runnerID, pushID, errText string, maxAttempts int) (found, gaveUp bool, err error) {
	err = q.QueryRow(ctx, `UPDATE runner_pushes SET last_error = $3,
			acked_at = CASE WHEN attempts >= $4 THEN now() END
		WHERE id = $1 AND runner_id = $2 AND acked_at IS NULL
		RETURNING acked_at IS NOT NULL`, pushID, runnerID, errText, maxAttempts).Scan(&gaveUp)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("record push failure %s: %w", pushID, err)
	}
	return true, gaveUp, nil
}
