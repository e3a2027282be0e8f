package a2a

import (
	"context"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
)

// FollowPolicyTx is what setting a message policy does to the messages it
// holds (resources.PolicyHolds): the pending a2a.send holds from the
// policy's source to its target name the policy's approvers and need its
// quorum from the same commit, so an approver it no longer names can
// neither approve them nor count toward their quorum (as a revoked role
// cannot).
func FollowPolicyTx(ctx context.Context, tx pgx.Tx, p *guardv1.MessagePolicy) error {
	_, err := approvals.RenameApproversTx(ctx, tx, approvals.NamedApprovers{
		CatalogAction: Action, AgentGroupID: p.GetFromGroup(), Resource: map[string]string{"to": p.GetToGroup()},
	}, p.GetApproverUserId(), p.GetAlsoApproverUserIds(), int(p.GetApprovals()))
	return err
}
