package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// userMayAsk keeps a user's dry runs inside what they may read (the
// resources read scoping), before anything is evaluated. Owners and global
// admins read everything. Anyone else asks only about agents of the groups
// they administer or about themselves, and only when they may read every
// object the entry's facts read from the request (guard.Entry.Names): a
// chat wired to one of their groups, one of their groups. An object they
// may not read is NotFound in the words used for one that does not exist,
// so the answer tells "not yours" from "missing" no better than a read
// does (a dry run reads live facts: sender policies, wirings, pending
// registrations).
func (s *GuardService) userMayAsk(ctx context.Context, user string, r *guard.Request) error {
	roles, err := approvals.LoadRoles(ctx, s.d.Pool, user)
	if err != nil {
		return status.Errorf(codes.Unavailable, "read roles: %v", err)
	}
	if roles.Owner || roles.GlobalAdmin {
		return nil
	}
	if !actorAskable(user, roles, r.Actor) {
		return status.Error(codes.PermissionDenied, "actor: a user asks only about agents of groups they administer, or about themselves")
	}
	entry, ok := s.d.Engine.Catalog.Lookup(r.Action)
	if !ok {
		return nil // not in the catalog: allowed, reading nothing
	}
	if entry.Names == nil {
		if entry.Args != nil {
			// Facts read from the request, undeclared: fail closed.
			return status.Errorf(codes.PermissionDenied, "%s: a dry run of this action is for owners and global admins", r.Action)
		}
		return nil
	}
	groups := make([]string, 0, len(roles.AdminOf))
	for g := range roles.AdminOf {
		groups = append(groups, g)
	}
	for _, ref := range entry.Names(&r.Input) {
		switch ref.Kind {
		case guard.RefAgentGroup:
			if !roles.AdminOf[ref.ID] {
				return status.Errorf(codes.NotFound, "agent group %q not found", ref.ID)
			}
		case guard.RefChat:
			visible, err := resources.ChatVisible(ctx, s.d.Pool, groups, ref.ID)
			if err != nil {
				return DBError("messaging group", err)
			}
			if !visible {
				return status.Errorf(codes.NotFound, "messaging group %q not found", ref.ID)
			}
		default:
			return status.Errorf(codes.PermissionDenied, "%s: names an object of unknown kind", r.Action)
		}
	}
	return nil
}

// actorAskable: a scoped admin asks about agents of their groups; anyone
// about themselves.
func actorAskable(user string, roles approvals.Roles, a *guardv1.Actor) bool {
	switch k := a.GetKind().(type) {
	case *guardv1.Actor_Agent:
		return roles.AdminOf[k.Agent.GetAgentGroupId()]
	case *guardv1.Actor_Human:
		return k.Human.GetUserId() == user
	}
	return false
}
