package guard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clawguard/clawguard/server/internal/store"
)

// logRow is one row of the decision log.
type logRow struct {
	ID, Action, ActorKind     string
	Actor                     *string // NULL when the kind and columns imply it (storedActor)
	Group, Session            *string
	Effect, Reason, DecidedBy string
	Grant, Hold               string
	LatencyUS                 int64
	DryRun                    bool
	RunnerID, RequestID       string
	Answer                    []byte // set when RequestID is: the stored answer for retries
	Trace                     []byte // catalog decisions: what Explain needs later (explain.go)
	At                        time.Time
	// Mode is the gate's audit or warn mode when it relaxed the answer;
	// WouldEffect and WouldReason are what enforce would have answered.
	Mode, WouldEffect, WouldReason string
	// fence, when set, is the fact revision a copy was read at: the row is
	// written only while the database is still at it (see reading.fence).
	fence *int64
}

// rev is the row's fence as the INSERT's rev parameter (-1: read live).
func (r *logRow) rev() int64 {
	if r.fence == nil {
		return -1
	}
	return *r.fence
}

// errConflict says another decision already holds this (runner, request_id).
var errConflict = errors.New("request id already decided")

// errStale says a row decided from the snapshot was not written: the
// database's fact revision had moved past the snapshot's (or its request id
// was already decided). Nothing is logged; the decision is made again live.
var errStale = errors.New("decided from a stale snapshot")

// The log INSERT. A row decided from the snapshot (rev ≥ 0) is written
// only while fact_revision still equals its rev: the statement's snapshot
// is taken after every decision of the batch began, so a change committed
// before then is seen and the row is left out (errStale). A row with a
// request id first claims (runner_id, request_id) in decision_requests,
// with its answer for retries; only the rows whose claim won (or that
// carry no request id) are logged — two statements' worth of work in one
// round trip (the idempotency key lives outside the partitioned log, whose
// unique indexes would have to include at). A batch where no row carries a
// request id skips the claim.
//
// The rows come as a VALUES list of parameters up to valuesMaxRows rows,
// as column arrays (unnest) beyond: for the one-row batches of everyday
// load, binding arrays costs Postgres more than scalars.
const (
	logColumns = `id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
   grant_id, hold_id, latency_us, dry_run, runner_id, request_id, trace, mode, would_effect, would_reason`
	rowColumns = `id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, decided_by,
       grant_id, hold_id, latency_us, dry_run, runner_id, request_id, answer, trace, mode, would_effect, would_reason, rev`
	unnestRows = `unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[]::jsonb[], $5::text[], $6::text[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bool[], $15::text[], $16::text[], $17::bytea[],
    $18::text[]::jsonb[], $19::text[], $20::text[], $21::text[], $22::bigint[])`
	logParams = 22 // per row, in rowColumns order

	valuesMaxRows = 16
)

// valuesRow is the typed parameter list of row i of a VALUES list.
func valuesRow(i int) string {
	types := [logParams]string{"text", "timestamptz", "text", "text::jsonb", "text", "text", "text", "text", "text", "text", "text",
		"text", "bigint", "bool", "text", "text", "bytea", "text::jsonb", "text", "text", "text", "bigint"}
	var b strings.Builder
	b.WriteByte('(')
	for c, t := range types {
		if c > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d::%s", i*logParams+c+1, t)
	}
	b.WriteByte(')')
	return b.String()
}

// revCheck is the condition a row must meet: decided live (rev < 0), or
// from the snapshot at the database's fact revision — and with the
// triggers that keep the revision honest still in place on every mirrored
// table: with one dropped or disabled (a bulk load's DISABLE TRIGGER ALL),
// changes would commit without moving the revision, and a copy at an
// unmoved revision would be stale. So a missing trigger sends the rows
// live, from the first decision after it went.
func revCheck(mirrored []string) string {
	if len(mirrored) == 0 {
		return `rev < 0`
	}
	return `rev < 0 OR (rev = (SELECT rev FROM fact_revision) AND (SELECT count(*) FROM pg_trigger
      WHERE tgrelid = ANY (ARRAY['` + strings.Join(mirrored, `', '`) + `']::regclass[])
        AND tgname IN ('fact_changed', 'fact_truncated') AND tgenabled IN ('O', 'A')) = ` + fmt.Sprint(2*len(mirrored)) + `)`
}

// insertStatementSQL builds the statement for n rows, with or without the
// claim, checking decisions from the snapshot against the mirrored tables.
func insertStatementSQL(n int, claim bool, mirrored []string) string {
	source := unnestRows
	if n <= valuesMaxRows {
		rows := make([]string, n)
		for i := range rows {
			rows[i] = valuesRow(i)
		}
		source = "(VALUES " + strings.Join(rows, ",\n  ") + ")"
	}
	if !claim {
		return `INSERT INTO decisions (` + logColumns + `)
SELECT ` + logColumns + `
FROM ` + source + `
  AS u(` + rowColumns + `)
WHERE ` + revCheck(mirrored) + `
RETURNING id`
	}
	return `WITH rows AS (
  SELECT * FROM ` + source + `
    AS u(` + rowColumns + `)
  WHERE ` + revCheck(mirrored) + `
), claimed AS (
  INSERT INTO decision_requests (runner_id, request_id, decision_id, at, answer)
  SELECT runner_id, request_id, id, at, answer FROM rows WHERE request_id <> ''
  ON CONFLICT (runner_id, request_id) DO NOTHING
  RETURNING decision_id
)
INSERT INTO decisions (` + logColumns + `)
SELECT ` + logColumns + `
FROM rows WHERE request_id = '' OR id IN (SELECT decision_id FROM claimed)
RETURNING id`
}

// logStatements are the log INSERTs, built once per set of mirrored
// tables: [claim][rows] for VALUES lists, [claim][0] the unnest forms.
type logStatements [2][valuesMaxRows + 1]string

func newLogStatements(mirrored []string) *logStatements {
	var out logStatements
	for c := range 2 {
		for n := 1; n <= valuesMaxRows; n++ {
			out[c][n] = insertStatementSQL(n, c == 1, mirrored)
		}
		out[c][0] = insertStatementSQL(valuesMaxRows+1, c == 1, mirrored)
	}
	return &out
}

// liveStatements write rows decided live only (the transactions of grants
// and holds): no snapshot revision to check.
var liveStatements = newLogStatements(nil)

// insert is the log INSERT for rows and its arguments.
func (ls *logStatements) insert(rows []*pendingRow) (string, []any) {
	claim := 0
	for _, p := range rows {
		if p.row.RequestID != "" {
			claim = 1
			break
		}
	}
	if len(rows) <= valuesMaxRows {
		return ls[claim][len(rows)], valuesArgs(rows)
	}
	return ls[claim][0], batchArgs(rows)
}

// insertTx writes one row decided live: in the caller's transaction (hold
// paths), or as a statement of its own (a replay that consumed nothing).
func insertTx(ctx context.Context, tx store.Querier, r *logRow) error {
	sql, args := liveStatements.insert([]*pendingRow{{row: r}})
	written, err := collectIDs(tx.Query(ctx, sql, args...))
	return checkInserted(r, written, err)
}

// queueInsert is insertTx queued onto b, to go out in the round trip of
// the transaction's next statements: its outcome is b's (errConflict when
// the request id was decided before).
func queueInsert(b *pgx.Batch, r *logRow) {
	sql, args := liveStatements.insert([]*pendingRow{{row: r}})
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		written, err := collectIDs(rows, nil)
		return checkInserted(r, written, err)
	})
}

// checkInserted is the outcome of writing r: errConflict when its id did
// not come back (the request id was decided before).
func checkInserted(r *logRow, written map[string]bool, err error) error {
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

// valuesArgs encodes rows as a VALUES list's parameters (rowColumns order).
func valuesArgs(rows []*pendingRow) []any {
	out := make([]any, 0, len(rows)*logParams)
	for _, p := range rows {
		r := p.row
		out = append(out, r.ID, r.At, r.Action, r.Actor, r.ActorKind, r.Group, r.Session, r.Effect, r.Reason, r.DecidedBy,
			r.Grant, r.Hold, r.LatencyUS, r.DryRun, r.RunnerID, r.RequestID, r.Answer, traceArg(r.Trace), r.Mode, r.WouldEffect, r.WouldReason, r.rev())
	}
	return out
}

// batchArgs encodes rows as the column arrays of the unnest form.
func batchArgs(rows []*pendingRow) []any {
	n := len(rows)
	var (
		ids, actions, kinds, effects = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		actors                       = make([]*string, n)
		reasons, by, grants, holds   = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		runners, reqs                = make([]string, n), make([]string, n)
		ats                          = make([]time.Time, n)
		groups, sessions             = make([]*string, n), make([]*string, n)
		lat                          = make([]int64, n)
		dry                          = make([]bool, n)
		answers                      = make([][]byte, n)
		traces                       = make([]*string, n)
		modes, wouldEff, wouldWhy    = make([]string, n), make([]string, n), make([]string, n)
		revs                         = make([]int64, n)
	)
	for i, p := range rows {
		r := p.row
		ids[i], ats[i], actions[i], actors[i], kinds[i] = r.ID, r.At, r.Action, r.Actor, r.ActorKind
		groups[i], sessions[i], effects[i], reasons[i], by[i] = r.Group, r.Session, r.Effect, r.Reason, r.DecidedBy
		grants[i], holds[i], lat[i], dry[i], runners[i], reqs[i], answers[i] = r.Grant, r.Hold, r.LatencyUS, r.DryRun, r.RunnerID, r.RequestID, r.Answer
		traces[i] = traceArg(r.Trace)
		modes[i], wouldEff[i], wouldWhy[i] = r.Mode, r.WouldEffect, r.WouldReason
		revs[i] = r.rev()
	}
	return []any{ids, ats, actions, actors, kinds, groups, sessions, effects, reasons, by, grants, holds, lat, dry, runners, reqs, answers, traces,
		modes, wouldEff, wouldWhy, revs}
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
		case !written[p.row.ID] && p.row.fence != nil:
			p.done <- errStale
		case !written[p.row.ID]:
			p.done <- errConflict
		default:
			p.done <- nil
		}
	}
}

// consumeStatements [claim] consume a grant and log the replay's ALLOW in
// one statement, so in one round trip and one transaction: the hold owner's
// consume transition (consume, as approvals.Consume writes it) marks the
// hold consumed_by the row's id ($1) only if it is approved, unused and of
// the entry's approval action ($23 the grant, $24 the kind), and the row is
// written only if it did. Its claim of (runner_id, request_id) has no ON
// CONFLICT: a request id decided before fails the statement, and the
// consume with it (errConflict: the earlier answer stands).
type consumeStatements [2]string

func newConsumeStatements(consume func(decision, hold, kind string) string) *consumeStatements {
	return &consumeStatements{consumeStatementSQL(consume, false), consumeStatementSQL(consume, true)}
}

func consumeStatementSQL(consume func(decision, hold, kind string) string, claim bool) string {
	head := `WITH consumed AS (
  ` + consume("$1", "$23", "$24") + `
), rows AS (
  SELECT * FROM (VALUES ` + valuesRow(0) + `) AS u(` + rowColumns + `)
  WHERE EXISTS (SELECT 1 FROM consumed)
)`
	if claim {
		head += `, claimed AS (
  INSERT INTO decision_requests (runner_id, request_id, decision_id, at, answer)
  SELECT runner_id, request_id, id, at, answer FROM rows
)`
	}
	return head + `
INSERT INTO decisions (` + logColumns + `)
SELECT ` + logColumns + ` FROM rows
RETURNING id`
}

// consumeAndLog runs the consume statement for r: won is whether the grant
// was consumed (and r logged); when not, nothing was written.
func (cs *consumeStatements) consumeAndLog(ctx context.Context, q store.Querier, r *logRow, grant, kind string) (won bool, err error) {
	claim := 0
	if r.RequestID != "" {
		claim = 1
	}
	args := append(valuesArgs([]*pendingRow{{row: r}}), grant, kind)
	written, err := collectIDs(q.Query(ctx, cs[claim], args...))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "decision_requests_pkey" {
		return false, errConflict
	}
	if err != nil {
		return false, fmt.Errorf("consume grant: %w", err)
	}
	return written[r.ID], nil
}

// CiteTx records that a decision was cited: the mutation it authorized is
// being applied in tx (Registry.ApplyAction), and the citation is used.
func CiteTx(ctx context.Context, tx store.Querier, decisionID string) error {
	key, args := store.DecisionKey(1, decisionID)
	if _, err := tx.Exec(ctx, `UPDATE decisions SET cited_at = now() WHERE `+key, args...); err != nil {
		return fmt.Errorf("cite decision %s: %w", decisionID, err)
	}
	return nil
}

// DecisionsOfHold are the ids of the logged decisions that name a hold,
// oldest first, at most limit: the HOLD that made it and the replays that
// used its grant (a hold's history, Approvals.Get).
func DecisionsOfHold(ctx context.Context, q store.Querier, holdID string, limit int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM (
		SELECT id, at FROM decisions WHERE hold_id = $1 AND hold_id <> ''
		UNION SELECT id, at FROM decisions WHERE grant_id = $1 AND grant_id <> '') d ORDER BY at, id LIMIT $2`, holdID, limit)
	if err != nil {
		return nil, fmt.Errorf("the decisions of hold %s: %w", holdID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("the decisions of hold %s: %w", holdID, err)
	}
	return ids, nil
}
