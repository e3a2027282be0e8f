package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Approvals used by the next request (issues 43 and 44). A held outbound
// connection or model call is not replayed: the connection or the call that
// was held is gone by the time a human answers. Its approval waits instead for the session's next identical
// request, which the guard answers ALLOW by consuming the hold (the
// ConsumeTransition, in the statement that logs the ALLOW), once.

// nextUseKinds are the hold kinds whose approval the next request uses
// (the catalog entries marked NextRequestUses; approvals does not import
// the domains): an approval tells the session to ask again.
var nextUseKinds = map[string]bool{"net_connect": true, "model_call": true, "model_budget": true}

// NextUseWindow is how long after its approval a hold waits for the
// request that uses it; an approval left unused longer is not used.
const NextUseWindow = time.Hour

// NextUse is a request that may use an approval left for it.
type NextUse struct {
	Kind, CatalogAction, SessionID string
	Resource                       map[string]string
	Payload                        map[string]any
	// Rule and Scope are what the request would be held under now: every
	// approver who approved must still pass MayResolve for them, so a
	// revoked role ends the approval as it ends a standing grant.
	Rule  *guardv1.ApproverRule
	Scope guardv1.ApproverScope
}

// FindApprovedTx finds, in the caller's transaction (the decision's), an
// approved and unused hold of q's kind, catalog action, session, resource
// and payload, approved within NextUseWindow, and locks it (SKIP LOCKED: a
// concurrent request takes another or none). "" when there is none.
func FindApprovedTx(ctx context.Context, tx pgx.Tx, q NextUse) (holdID string, approvedBy []string, err error) {
	if q.SessionID == "" || q.Scope == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL {
		return "", nil, nil
	}
	resource, err := json.Marshal(orEmptyMap(q.Resource))
	if err != nil {
		return "", nil, nil
	}
	payload, err := json.Marshal(orEmptyAny(q.Payload))
	if err != nil {
		return "", nil, nil // a payload that cannot be encoded matches nothing
	}
	rows, err := tx.Query(ctx, `SELECT h.id, COALESCE(
		    (SELECT array_agg(a.user_id ORDER BY a.approved_at, a.user_id) FROM hold_approvals a WHERE a.hold_id = h.id AND a.counted),
		    ARRAY[h.resolver]) AS approved_by
		FROM holds h
		WHERE h.session_id = $1 AND h.kind = $2 AND h.catalog_action = $3 AND h.status = 'approved' AND h.consumed_at IS NULL
		  AND h.resource = $4::jsonb AND h.payload = $5::jsonb AND h.resolved_at > now() - make_interval(secs => $6)
		ORDER BY h.resolved_at LIMIT 4 FOR UPDATE OF h SKIP LOCKED`,
		q.SessionID, q.Kind, q.CatalogAction, string(resource), string(payload), NextUseWindow.Seconds())
	if err != nil {
		return "", nil, fmt.Errorf("find an approval left for the next request: %w", err)
	}
	type found struct {
		id string
		by []string
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
		var f found
		return f, r.Scan(&f.id, &f.by)
	})
	if err != nil {
		return "", nil, fmt.Errorf("find an approval left for the next request: %w", err)
	}
	for _, f := range list {
		ok, err := ApproversMay(ctx, tx, q.Rule, q.Scope, f.by)
		if err != nil {
			return "", nil, err
		}
		if ok {
			return f.id, f.by, nil
		}
	}
	return "", nil, nil
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func orEmptyAny(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// NextUseKind reports whether the approval of a hold kind is used by the
// next identical request (app checks it against every catalog entry marked
// NextRequestUses, both ways).
func NextUseKind(kind string) bool { return nextUseKinds[kind] }

// NextUseKinds are those kinds.
func NextUseKinds() []string {
	out := make([]string, 0, len(nextUseKinds))
	for k := range nextUseKinds {
		out = append(out, k)
	}
	return out
}
