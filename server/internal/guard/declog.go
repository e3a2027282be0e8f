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

// insertBatchSQL writes a batch of rows. A row with a request id first
// claims (runner_id, request_id) in decision_requests, with its answer for
// retries; only the rows whose claim won (or that carry no request id) are
// logged. Two statements' worth of work in one round trip, and the
// idempotency key lives outside the partitioned log, whose unique indexes
// would have to include at.
const insertBatchSQL = `WITH rows AS (
  SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[]::jsonb[], $5::text[], $6::text[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bool[], $15::text[], $16::text[], $17::bytea[],
    $18::text[]::jsonb[], $19::text[], $20::text[], $21::text[])
    AS u(id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
         grant_id, hold_id, latency_us, dry_run, runner_id, request_id, answer, trace, mode, would_effect, would_reason)
), claimed AS (
  INSERT INTO decision_requests (runner_id, request_id, decision_id, at, answer)
  SELECT runner_id, request_id, id, at, answer FROM rows WHERE request_id <> ''
  ON CONFLICT (runner_id, request_id) DO NOTHING
  RETURNING decision_id
)
INSERT INTO decisions
  (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, trace, mode, would_effect, would_reason)
SELECT id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, trace, mode, would_effect, would_reason
FROM rows WHERE request_id = '' OR id IN (SELECT decision_id FROM claimed)
RETURNING id`

// insertPlainSQL is insertBatchSQL for a batch where no row carries a
// request id (nothing to claim): the plain multi-row insert.
const insertPlainSQL = `INSERT INTO decisions
  (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, trace, mode, would_effect, would_reason)
SELECT id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, trace, mode, would_effect, would_reason
FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[]::jsonb[], $5::text[], $6::text[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bool[], $15::text[], $16::text[], $17::bytea[],
    $18::text[]::jsonb[], $19::text[], $20::text[], $21::text[])
  AS u(id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
       grant_id, hold_id, latency_us, dry_run, runner_id, request_id, answer, trace, mode, would_effect, would_reason)
RETURNING id`

// insertSQL is the statement for rows: the claim only when one needs it.
func insertSQL(rows []*pendingRow) string {
	for _, p := range rows {
		if p.row.RequestID != "" {
			return insertBatchSQL
		}
	}
	return insertPlainSQL
}

// insertTx writes one row in the caller's transaction (grant and hold paths).
func insertTx(ctx context.Context, tx pgx.Tx, r *logRow) error {
	rows := []*pendingRow{{row: r}}
	written, err := collectIDs(tx.Query(ctx, insertSQL(rows), batchArgs(rows)...))
	if err != nil {
		return fmt.Errorf("log decision: %w", err)
	}
	if !written[r.ID] {
		return errConflict
	}
	return nil
}

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
