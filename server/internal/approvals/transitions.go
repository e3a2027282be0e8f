package approvals

// The hold's state machine: every write of the holds and hold_approvals
// tables is one of these transitions, and nothing outside this file writes
// them (the guard consumes with ConsumeTransition, the registry marks a
// hold applied with MarkAppliedTx, a group's deletion takes its holds with
// DeleteGroupHoldsTx).
//
//	pending ─resolve─▶ approved | rejected | expired | swept
//	pending: reminded once, escalated once (approvers added); a reason capture armed, disarmed; approvers renamed with their policy;
//	         quorum clicks recorded, the counted ones marked when it is met
//	approved ─consume (the replay's ALLOW, one statement)─▶ consumed ─apply─▶ applied
//	approved, never applied ─given up by the reconciler─▶ unapplied
//	approved: dispatch bookkeeping (the server's own handlers), replay bookkeeping (the reconciler)
//	any ─its group deleted─▶ gone

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/server/internal/store"
)

// sqlCreate is create: a new pending hold (CreateHoldTx), RETURNING the hold.
const sqlCreate = `INSERT INTO holds (id, kind, catalog_action, payload, session_id, agent_group_id, requester,
			approver_user_id, approver_rule, approver_scope, dedup_key, expires_at, title, question, options,
			delivered_to, origin_channel_type, delivery_action, swept_on_restart, approvals_required, also_approvers, resource, also_delivered_to,
			remind_at, escalate_at, escalate_to, trace_parent)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, NULLIF($8, ''), $9, $10, NULLIF($11, ''),
			$12, $13, $14, $15, NULLIF($16, ''), $17, $18, $19, $20, $21, $22, $23,
			CASE WHEN $24::int > 0 THEN now() + make_interval(secs => $24::int) END,
			CASE WHEN $25::int > 0 AND cardinality($26::text[]) > 0 THEN now() + make_interval(secs => $25::int) END, $26, $27)
		ON CONFLICT (dedup_key) WHERE status = 'pending' AND dedup_key IS NOT NULL DO NOTHING
		RETURNING `

// createTx is create: the planned hold, pending (sqlCreate), RETURNING
// it; pgx.ErrNoRows when a live hold with its dedup key won the race.
func createTx(ctx context.Context, tx pgx.Tx, p holdPlan) (*guardv1.Hold, error) {
	return readHold(ctx, tx, sqlCreate+holdColumns,
		newHoldID(), p.kind, p.catalogAction, p.payload, p.sessionID, p.groupID, p.requester,
		p.approverUser, p.rule, p.scope, p.dedupKey, p.expires, p.title, p.question, p.options,
		p.deliveredTo, p.origin, p.deliveryAction, p.sweptOnRestart, p.required, p.alsoApprovers, p.resource, p.alsoDelivered,
		p.escalation.RemindAfterS, p.escalation.EscalateAfterS, orEmpty(p.escalation.EscalateTo),
		telemetry.Traceparent(ctx))
}

// sqlClearOtherCaptures is a reason capture armed: the clicker's other pending captures end ($1 clicker, $2 the hold keeping it).
// The condition that awaiting_reason_from is not empty (implied: a clicker never is) is stated so
// that a generic plan (store.KeyedTx) can use holds_awaiting_reason_idx.
const sqlClearOtherCaptures = `UPDATE holds SET awaiting_reason_from = '', awaiting_reason_at = NULL
		WHERE awaiting_reason_from = $1 AND awaiting_reason_from <> '' AND status = 'pending' AND id <> $2`

// sqlArmReason is reject with reason: the pending hold awaits the clicker's next message ($1 hold, $2 clicker), RETURNING the hold.
const sqlArmReason = `UPDATE holds SET awaiting_reason_from = $2, awaiting_reason_at = now()
		WHERE id = $1 AND status = 'pending' RETURNING `

// sqlDisarmReason is a reason capture ended without a reason ($1 hold, $2 clicker).
const sqlDisarmReason = `UPDATE holds SET awaiting_reason_from = '', awaiting_reason_at = NULL
		WHERE id = $1 AND awaiting_reason_from = $2`

// sqlResolve is resolve: pending → approved, rejected, expired or swept ($1 hold, $2 status, $3 resolver, $4 reason, $5 choice, $6 the kinds with handlers: an approval of any other kind is dispatched by its commit), RETURNING the hold.
const sqlResolve = `UPDATE holds
		SET status = $2, resolved_at = now(), resolver = $3, reason = $4, choice = $5,
		    awaiting_reason_from = '', awaiting_reason_at = NULL,
		    dispatched_at = CASE WHEN $2 = 'approved' AND NOT kind = ANY($6) THEN now() END
		WHERE id = $1 AND status = 'pending'
		RETURNING `

// resolveRowTx is resolve: the pending hold id leaves pending with outcome
// (sqlResolve), RETURNING the hold and its trace context (a replay push
// carries it); nil when it was not pending. kinds are the kinds with
// handlers: an approval of any other kind is dispatched by its commit.
func resolveRowTx(ctx context.Context, tx pgx.Tx, id string, outcome guardv1.Outcome, resolver, reason, choice string, kinds []string) (*guardv1.Hold, string, error) {
	statusWord, _, err := resolutionWords(outcome)
	if err != nil {
		return nil, "", fmt.Errorf("resolve hold %s: %w", id, err)
	}
	rows, err := tx.Query(ctx, sqlResolve+holdColumns+`, trace_parent`, id, statusWord, resolver, reason, choice, kinds)
	if err != nil {
		return nil, "", fmt.Errorf("resolve hold %s: %w", id, err)
	}
	var held string
	hold, err := pgx.CollectOneRow(rows, func(row pgx.CollectableRow) (*guardv1.Hold, error) {
		r, err := pgx.RowToStructByName[tracedHoldRow](row)
		if err != nil {
			return nil, err
		}
		held = r.TraceParent
		return r.proto()
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("resolve hold %s: %w", id, err)
	}
	return hold, held, nil
}

// sqlDispatched is dispatch: an approved hold's handlers ran ($1 hold).
const sqlDispatched = `UPDATE holds SET dispatched_at = now() WHERE id = $1 AND dispatched_at IS NULL`

// sqlRedispatchLater is dispatch again later: the handlers could not finish (the guard could not decide), after a doubling delay ($1 hold), RETURNING the attempts so far.
const sqlRedispatchLater = `UPDATE holds SET dispatch_attempts = dispatch_attempts + 1,
				dispatched_at = NULL, dispatch_after = now() + make_interval(secs => 10 * power(2, LEAST(dispatch_attempts, 10)))
			WHERE id = $1 RETURNING dispatch_attempts`

// sqlDispatchGivenUp is dispatch given up: no more attempts ($1 hold).
const sqlDispatchGivenUp = `UPDATE holds SET dispatched_at = now() WHERE id = $1`

// sqlClaimUndispatched is dispatch recovery: claim approved holds whose handlers never ran (another process died, or a retry is due), RETURNING them.
const sqlClaimUndispatched = `UPDATE holds SET dispatched_at = now()
		WHERE id IN (SELECT id FROM holds
		              WHERE status = 'approved' AND dispatched_at IS NULL AND kind = ANY($1)
		                AND (resolved_at < now() - make_interval(secs => $2) AND dispatch_after IS NULL
		                     OR dispatch_after <= now())
		              ORDER BY resolved_at LIMIT 20 FOR UPDATE SKIP LOCKED)
		  AND dispatched_at IS NULL
		RETURNING `

// sqlRenameApprovers is renamed: a message policy changed while its holds are pending: their approvers and quorum follow it.
const sqlRenameApprovers = `UPDATE holds SET approver_user_id = $4, also_approvers = $5, approvals_required = GREATEST($6::int, 1),
			awaiting_reason_from = CASE WHEN awaiting_reason_from = ANY($4::text || $5::text[]) THEN awaiting_reason_from ELSE '' END,
			awaiting_reason_at = CASE WHEN awaiting_reason_from = ANY($4::text || $5::text[]) THEN awaiting_reason_at END
		WHERE status = 'pending' AND approver_rule = '`

// sqlClaimReminders is remind: pending holds whose reminder is due and not
// yet sent are marked reminded, once (the row lock and the reminded_at
// condition: a replica that claims a hold another committed first finds it
// marked and skips it), RETURNING the hold. Its event is written in the
// same transaction, so a claim whose replica dies before commit is undone
// and taken again by the next sweep, on any replica.
const sqlClaimReminders = `UPDATE holds SET reminded_at = now()
		WHERE id IN (SELECT id FROM holds
		              WHERE status = 'pending' AND reminded_at IS NULL AND remind_at <= now()
		                AND (expires_at IS NULL OR expires_at > now())
		              ORDER BY remind_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		  AND status = 'pending' AND reminded_at IS NULL
		RETURNING `

// sqlClaimEscalations is escalate: pending holds whose escalation is due
// are marked escalated, once, and their escalate_to resolved to users now:
// named users that still exist, and the current admins of each named group
// ("group:<id>"), RETURNING the hold (as sqlClaimReminders).
const sqlClaimEscalations = `UPDATE holds SET escalated_at = now(), escalated_to = ARRAY(
			SELECT DISTINCT u FROM (
				SELECT e AS u FROM unnest(holds.escalate_to) e
				 WHERE e NOT LIKE 'group:%' AND EXISTS (SELECT 1 FROM users WHERE id = e)
				UNION
				SELECT r.user_id FROM unnest(holds.escalate_to) e
				  JOIN user_roles r ON r.role = 'admin' AND r.agent_group_id = substr(e, 7)
				 WHERE e LIKE 'group:%') x ORDER BY u)
		WHERE id IN (SELECT id FROM holds
		              WHERE status = 'pending' AND escalated_at IS NULL AND escalate_at <= now()
		                AND (expires_at IS NULL OR expires_at > now())
		              ORDER BY escalate_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		  AND status = 'pending' AND escalated_at IS NULL
		RETURNING `

// sqlCountReplay is replay re-sent by the reconciler ($1 hold).
const sqlCountReplay = `UPDATE holds SET replay_attempts = replay_attempts + 1, replay_checked_at = now() WHERE id = $1`

// sqlUnapplied is unapplied: an approved hold the reconciler gave up on, and why ($1 hold, $2 why).
const sqlUnapplied = `UPDATE holds SET unapplied_at = now(), unapplied_reason = $2, replay_checked_at = now() WHERE id = $1`

// sqlRecordApproval is a quorum click recorded (once per user).
// ($3, $4: the standing grant this approver asked for, 0 and false = once.)
const sqlRecordApproval = `INSERT INTO hold_approvals (hold_id, user_id, standing_secs, standing_session) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`

// sqlCounted is the quorum met: which approvals made it ($1 hold, $2 the users counted).
const sqlCounted = `UPDATE hold_approvals SET counted = (user_id = ANY($2)) WHERE hold_id = $1`

// ConsumeTransition is consume: an approved, unused hold of a kind marked
// consumed by a decision, RETURNING id. The guard runs it in the same
// statement as the replay's ALLOW row ({decision}, {hold} and {kind} are
// the parameters it names), so the grant is used only by a logged ALLOW.
const ConsumeTransition = `UPDATE holds SET consumed_at = now(), consumed_by = {decision}
  WHERE id = {hold} AND status = 'approved' AND consumed_at IS NULL AND kind = {kind}
  RETURNING id`

// Consume is ConsumeTransition with its parameters in place.
func Consume(decision, hold, kind string) string {
	return strings.NewReplacer("{decision}", decision, "{hold}", hold, "{kind}", kind).Replace(ConsumeTransition)
}

// MarkAppliedTx is apply: the consuming decision's action ran, with its
// result (once: a repeated citation changes nothing).
func MarkAppliedTx(ctx context.Context, tx pgx.Tx, holdID string, result []byte) error {
	if _, err := tx.Exec(ctx, `UPDATE holds SET applied_at = now(), applied_result = $2 WHERE id = $1 AND applied_at IS NULL`, holdID, result); err != nil {
		return fmt.Errorf("mark hold %s applied: %w", holdID, err)
	}
	return nil
}

// DeleteGroupHoldsTx is gone: a deleted group's holds, anchored to it or
// asked from its sessions, with their approvals and events (cascade).
func DeleteGroupHoldsTx(ctx context.Context, q store.Querier, groupID string) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM holds WHERE agent_group_id = $1 OR session_id IN (SELECT id FROM sessions WHERE agent_group_id = $1)`, groupID)
	if err != nil {
		return 0, fmt.Errorf("delete the holds of group %s: %w", groupID, err)
	}
	return tag.RowsAffected(), nil
}
