package approvals

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// A quorum counts only the approvals of approvers eligible when it is
// judged: mayResolve over their roles and the hold's rule as they are now
// (D1 included). An approver whose role was revoked, or whom the message
// policy no longer names, while the hold was partial no longer counts; a
// role granted back counts again. Their rows stay on record, and once the
// quorum is met hold_approvals.counted says which approvals made it.

// rolesOfUsersSQL reads the roles of several users.
const rolesOfUsersSQL = `SELECT user_id, role, COALESCE(agent_group_id, '') FROM user_roles WHERE user_id = ANY($1)`

// scanRolesOf reads user_id, role, group rows into each user's Roles (a
// user with none gets empty Roles).
func scanRolesOf(rows pgx.Rows, users []string) (map[string]Roles, error) {
	out := make(map[string]Roles, len(users))
	for _, u := range users {
		out[u] = Roles{AdminOf: map[string]bool{}}
	}
	defer rows.Close()
	for rows.Next() {
		var user, role, group string
		if err := rows.Scan(&user, &role, &group); err != nil {
			return nil, fmt.Errorf("read approvers' roles: %w", err)
		}
		r := out[user]
		r.add(role, group)
		out[user] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read approvers' roles: %w", err)
	}
	return out, nil
}

// markEligibility sets each approval's Ineligible from roles and returns
// how many count.
func markEligibility(h *guardv1.Hold, roles map[string]Roles) int {
	counted := 0
	for _, a := range h.GetApprovals() {
		a.Ineligible = !MayResolveWithRoles(h.GetApproverRule(), h.GetApproverScope(), a.GetUserId(), roles[a.GetUserId()])
		if !a.Ineligible {
			counted++
		}
	}
	return counted
}

// judgeApprovals marks, on pending holds, the approvals that would not
// count if the quorum were judged now (what ncl approvals get and the
// console show); an approved hold keeps the marks its quorum was met with.
func judgeApprovals(ctx context.Context, q store.Querier, holds ...*guardv1.Hold) error {
	var users []string
	for _, h := range holds {
		if h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
			continue
		}
		for _, a := range h.GetApprovals() {
			if !slices.Contains(users, a.GetUserId()) {
				users = append(users, a.GetUserId())
			}
		}
	}
	if len(users) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, rolesOfUsersSQL, users)
	if err != nil {
		return fmt.Errorf("read approvers' roles: %w", err)
	}
	roles, err := scanRolesOf(rows, users)
	if err != nil {
		return err
	}
	for _, h := range holds {
		if h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
			markEligibility(h, roles)
		}
	}
	return nil
}

// approveTowardQuorumTx records one approval of a hold that needs several
// (the hold row is locked by the caller, so concurrent clicks on any
// replica are judged one at a time) and judges the quorum: every approval
// on record, this one included, counts only if its approver may resolve
// the hold now. Short of the quorum it reports partial = true: the hold
// stays pending and, when this click added an approval, an
// approved_partial event says who approved and how many eligible
// approvals remain. A second click by the same user is recorded once and
// publishes nothing, but is judged: a quorum that an approver's restored
// eligibility completes is met by it. When the quorum is met it records
// which approvals counted and reports partial = false; the caller
// approves the hold.
func (s *Service) approveTowardQuorumTx(ctx context.Context, tx pgx.Tx, cur *guardv1.Hold, clicker string, st Standing) (*guardv1.Hold, bool, error) {
	// Run after the caller's row lock is held, so these statements see
	// every approval committed before ours (the locked read of cur may
	// predate them).
	batch := &pgx.Batch{}
	batch.Queue(sqlRecordApproval, cur.Id, clicker, int64(st.For/time.Second), st.Session)
	batch.Queue(`SELECT user_id FROM hold_approvals WHERE hold_id = $1`, cur.Id)
	// The approvers' role rows are locked FOR SHARE: a revocation in flight
	// either committed before this judgment (and is seen) or waits for it.
	batch.Queue(`SELECT user_id, role, COALESCE(agent_group_id, '') FROM user_roles
		WHERE user_id IN (SELECT user_id FROM hold_approvals WHERE hold_id = $1) FOR SHARE`, cur.Id)
	br := tx.SendBatch(ctx, batch)
	tag, err := br.Exec()
	var users []string
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			users, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
	}
	var roles map[string]Roles
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			roles, err = scanRolesOf(rows, users)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("record approval of hold %s: %w", cur.Id, err)
	}
	var counted []string
	for _, u := range users {
		if MayResolveWithRoles(cur.ApproverRule, cur.ApproverScope, u, roles[u]) {
			counted = append(counted, u)
		}
	}
	if len(counted) >= int(cur.ApprovalsRequired) {
		if _, err := tx.Exec(ctx, sqlCounted, cur.Id, counted); err != nil {
			return nil, false, fmt.Errorf("record the approvals that met hold %s's quorum: %w", cur.Id, err)
		}
		return nil, false, nil
	}
	h, err := GetHold(ctx, tx, cur.Id)
	if err != nil {
		return nil, false, fmt.Errorf("re-read hold %s: %w", cur.Id, err)
	}
	markEligibility(h, roles)
	if tag.RowsAffected() == 0 {
		return h, true, nil // already recorded
	}
	remaining := int(cur.ApprovalsRequired) - len(counted)
	if err := insertPartialEventTx(ctx, tx, h, clicker, remaining); err != nil {
		return nil, false, err
	}
	s.metrics.ApprovalsPartialTotal.WithLabelValues(h.Kind).Inc()
	return h, true, nil
}
