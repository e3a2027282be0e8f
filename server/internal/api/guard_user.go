package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
)

// userMayAsk keeps a user's dry runs inside what they may read (the
// resources read scoping): owners and global admins ask about any actor; a
// scoped admin about agents of the groups they administer; anyone about
// themselves. A dry run reads facts (destinations, policies, scopes) that
// would otherwise be an oracle across groups.
func (s *GuardService) userMayAsk(ctx context.Context, user string, a *guardv1.Actor) error {
	roles, err := approvals.LoadRoles(ctx, s.d.Pool, user)
	if err != nil {
		return DBError("roles", err)
	}
	if roles.Owner || roles.GlobalAdmin {
		return nil
	}
	switch k := a.GetKind().(type) {
	case *guardv1.Actor_Agent:
		if roles.AdminOf[k.Agent.GetAgentGroupId()] {
			return nil
		}
	case *guardv1.Actor_Human:
		if k.Human.GetUserId() == user {
			return nil
		}
	}
	return status.Error(codes.PermissionDenied, "actor: a user asks only about agents of groups they administer, or about themselves")
}
