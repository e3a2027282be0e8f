package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// logRow is one row of the decision log.
type logRow struct {
	ID, Action, Actor, ActorKind string
	Group, Session               *string
	Effect, Reason, DecidedBy    string
	Grant, Hold                  string
	LatencyUS                    int64
	DryRun                       bool
	RunnerID, RequestID          string
	Answer                       []byte // set when RequestID is: the stored answer for retries
	At                           time.Time
}

// errConflict says another decision already holds this (runner, request_id).
var errConflict = errors.New("request id already decided")

const insertDecisionSQL = `INSERT INTO decisions
  (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, answer)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
ON CONFLICT (runner_id, request_id) WHERE request_id <> '' DO NOTHING`

// insertTx writes one row in the caller's transaction (grant and hold paths).
func insertTx(ctx context.Context, tx pgx.Tx, r *logRow) error {
	tag, err := tx.Exec(ctx, insertDecisionSQL, r.ID, r.At, r.Action, r.Actor, r.ActorKind, r.Group, r.Session,
		r.Effect, r.Reason, r.DecidedBy, r.Grant, r.Hold, r.LatencyUS, r.DryRun, r.RunnerID, r.RequestID, r.Answer)
	if err != nil {
		return fmt.Errorf("log decision: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errConflict
	}
	return nil
}

const insertBatchSQL = `INSERT INTO decisions
  (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, answer)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[]::jsonb[], $5::text[], $6::text[], $7::text[],
  $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bool[], $15::text[], $16::text[], $17::bytea[])
ON CONFLICT (runner_id, request_id) WHERE request_id <> '' DO NOTHING
RETURNING id`

// decisionLog batches the hot path's log rows: whatever queued while the
// previous INSERT ran goes in the next one (natural batching), so a busy
// server pays one statement per batch, not per decision. Decide waits for
// its row's batch to commit before answering: an ALLOW's id is citable as
// soon as the runner has it.
type decisionLog struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	ch      chan *pendingRow
	writers int
	wg      sync.WaitGroup
	once    sync.Once
}

type pendingRow struct {
	row  *logRow
	done chan error
}

const maxBatch = 512

func newDecisionLog(pool *pgxpool.Pool, log *slog.Logger, writers int) *decisionLog {
	if writers < 1 {
		writers = 1
	}
	l := &decisionLog{pool: pool, log: log, ch: make(chan *pendingRow, 4*maxBatch), writers: writers}
	for range writers {
		l.wg.Add(1)
		go l.run()
	}
	return l
}

// write queues a row and waits until it is committed (or refused).
func (l *decisionLog) write(ctx context.Context, r *logRow) error {
	p := &pendingRow{row: r, done: make(chan error, 1)}
	select {
	case l.ch <- p:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The row is queued: wait for its batch even if the caller gives up, so
	// an answer is never sent for an unlogged decision.
	return <-p.done
}

// close stops the writers after the queue drains.
func (l *decisionLog) close() {
	l.once.Do(func() { close(l.ch) })
	l.wg.Wait()
}

func (l *decisionLog) run() {
	defer l.wg.Done()
	batch := make([]*pendingRow, 0, maxBatch)
	for p := range l.ch {
		batch = append(batch[:0], p)
	drain:
		for len(batch) < maxBatch {
			select {
			case q, ok := <-l.ch:
				if !ok {
					break drain
				}
				batch = append(batch, q)
			default:
				break drain
			}
		}
		l.flush(batch)
	}
}

func (l *decisionLog) flush(batch []*pendingRow) {
	n := len(batch)
	var (
		ids, actions, actors, kinds, effects, reasons, by, grants, holds, runners, reqs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ats                                                                             = make([]time.Time, n)
		groups                                                                          = make([]*string, n)
		sessions                                                                        = make([]*string, n)
		lat                                                                             = make([]int64, n)
		dry                                                                             = make([]bool, n)
		answers                                                                         = make([][]byte, n)
	)
	for i, p := range batch {
		r := p.row
		ids[i], ats[i], actions[i], actors[i], kinds[i] = r.ID, r.At, r.Action, r.Actor, r.ActorKind
		groups[i], sessions[i], effects[i], reasons[i], by[i] = r.Group, r.Session, r.Effect, r.Reason, r.DecidedBy
		grants[i], holds[i], lat[i], dry[i], runners[i], reqs[i], answers[i] = r.Grant, r.Hold, r.LatencyUS, r.DryRun, r.RunnerID, r.RequestID, r.Answer
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := l.pool.Query(ctx, insertBatchSQL, ids, ats, actions, actors, kinds, groups, sessions,
		effects, reasons, by, grants, holds, lat, dry, runners, reqs, answers)
	written := map[string]bool{}
	if err == nil {
		for rows.Next() {
			var id string
			if err = rows.Scan(&id); err != nil {
				break
			}
			written[id] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		l.log.Error("decision log write failed", "rows", n, "err", err)
		err = fmt.Errorf("log decision: %w", err)
	}
	for _, p := range batch {
		switch {
		case err != nil:
			p.done <- err
		case !written[p.row.ID]:
			p.done <- errConflict
		default:
			p.done <- nil
		}
	}
}
