package approvals

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// NamedApprovers selects the pending holds whose approvers a rule source
// (a message policy) names: decided as CatalogAction for an actor of
// AgentGroupID about Resource, held for named (exclusive) approvers.
type NamedApprovers struct {
	CatalogAction string
	AgentGroupID  string
	Resource      map[string]string
}

// RenameApproversTx makes those holds name approver and also instead, and
// need approvals distinct approvals (at least one), in the caller's
// transaction (the one that changes the source): from its commit an
// approver no longer named can neither resolve them nor count toward
// their quorum, and a newly named one can. It locks the holds as Resolve
// does, so a click in flight is judged wholly before or after the change.
// It returns how many holds changed.
func RenameApproversTx(ctx context.Context, tx pgx.Tx, sel NamedApprovers, approver string, also []string, approvals int) (int64, error) {
	if also == nil {
		also = []string{}
	}
	// A reject-reason capture armed by an approver no longer named ends
	// too: it would hold the others off until it lapsed.
	tag, err := tx.Exec(ctx, sqlRenameApprovers+ruleExclusive+`'
		  AND catalog_action = $1 AND agent_group_id = $2 AND resource @> $3::jsonb`,
		sel.CatalogAction, sel.AgentGroupID, sel.Resource, approver, also, approvals)
	if err != nil {
		return 0, fmt.Errorf("rename the approvers of pending %s holds of %s: %w", sel.CatalogAction, sel.AgentGroupID, err)
	}
	return tag.RowsAffected(), nil
}
