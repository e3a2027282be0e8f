package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	Trace                        []byte // catalog decisions: what Explain needs later (explain.go)
	At                           time.Time
	// Mode is the gate's audit or warn mode when it relaxed the answer;
	// WouldEffect and WouldReason are what enforce would have answered.
	Mode, WouldEffect, WouldReason string
}

// errConflict says another decision already holds this (runner, request_id).
var errConflict = errors.New("request id already decided")

const insertDecisionSQL = `INSERT INTO decisions
  (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, answer, trace, mode, would_effect, would_reason)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18::jsonb, $19, $20, $21)
ON CONFLICT (runner_id, request_id) WHERE request_id <> '' DO NOTHING`

// insertTx writes one row in the caller's transaction (grant and hold paths).
func insertTx(ctx context.Context, tx pgx.Tx, r *logRow) error {
	tag, err := tx.Exec(ctx, insertDecisionSQL, r.ID, r.At, r.Action, r.Actor, r.ActorKind, r.Group, r.Session,
		r.Effect, r.Reason, r.DecidedBy, r.Grant, r.Hold, r.LatencyUS, r.DryRun, r.RunnerID, r.RequestID, r.Answer, traceArg(r.Trace),
		r.Mode, r.WouldEffect, r.WouldReason)
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
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, answer, trace, mode, would_effect, would_reason)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[]::jsonb[], $5::text[], $6::text[], $7::text[],
  $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bool[], $15::text[], $16::text[], $17::bytea[],
  $18::text[]::jsonb[], $19::text[], $20::text[], $21::text[])
ON CONFLICT (runner_id, request_id) WHERE request_id <> '' DO NOTHING
RETURNING id`

// pendingRow is a log row waiting for its batch.
type pendingRow struct {
	row  *logRow
	done chan error
}

// batchArgs encodes rows as the column arrays of insertBatchSQL.
func batchArgs(rows []*pendingRow) []any {
	n := len(rows)
	var (
		ids, actions, actors, kinds, effects = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		reasons, by, grants, holds           = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		runners, reqs                        = make([]string, n), make([]string, n)
		ats                                  = make([]time.Time, n)
		groups, sessions                     = make([]*string, n), make([]*string, n)
		lat                                  = make([]int64, n)
		dry                                  = make([]bool, n)
		answers                              = make([][]byte, n)
		traces                               = make([]*string, n)
		modes, wouldEff, wouldWhy            = make([]string, n), make([]string, n), make([]string, n)
	)
	for i, p := range rows {
		r := p.row
		ids[i], ats[i], actions[i], actors[i], kinds[i] = r.ID, r.At, r.Action, r.Actor, r.ActorKind
		groups[i], sessions[i], effects[i], reasons[i], by[i] = r.Group, r.Session, r.Effect, r.Reason, r.DecidedBy
		grants[i], holds[i], lat[i], dry[i], runners[i], reqs[i], answers[i] = r.Grant, r.Hold, r.LatencyUS, r.DryRun, r.RunnerID, r.RequestID, r.Answer
		traces[i] = traceArg(r.Trace)
		modes[i], wouldEff[i], wouldWhy[i] = r.Mode, r.WouldEffect, r.WouldReason
	}
	return []any{ids, ats, actions, actors, kinds, groups, sessions, effects, reasons, by, grants, holds, lat, dry, runners, reqs, answers, traces,
		modes, wouldEff, wouldWhy}
}

// traceArg is the trace column's parameter (NULL when there is none).
func traceArg(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// settle answers every waiting row: written, a request-id conflict, or err.
func settle(rows []*pendingRow, written map[string]bool, err error) {
	for _, p := range rows {
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
