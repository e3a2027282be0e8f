package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
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
	roles, err := s.d.Reads.Roles(ctx, user)
	if err != nil {
		return err
	}
	if roles.Owner || roles.GlobalAdmin {
		return nil
	}
	if !actorAskable(user, roles, r.Actor) {
		return status.Error(codes.PermissionDenied, "actor: a user asks only about agents of groups they administer, or about themselves")
	}
	refs, err := s.namedObjects(r)
	if err != nil {
		return err
	}
	groups := make([]string, 0, len(roles.AdminOf))
	for g := range roles.AdminOf {
		groups = append(groups, g)
	}
	for _, ref := range refs {
		switch ref.Kind {
		case guard.RefAgentGroup:
			if !roles.AdminOf[ref.ID] {
				return status.Errorf(codes.NotFound, "agent group %q not found", ref.ID)
			}
		case guard.RefChat:
			visible, err := s.d.Reads.ChatVisible(ctx, groups, ref.ID)
			if err != nil {
				return err
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

// namedObjects are the objects a decision of r would read from the
// request (guard.Entry.Names), for callers that may read only some: an
// entry that reads the request without declaring them is refused (fail
// closed); an action outside the catalog reads nothing.
func (s *GuardService) namedObjects(r *guard.Request) ([]guard.Ref, error) {
	entry, ok := s.d.Engine.Catalog.Lookup(r.Action)
	switch {
	case !ok:
		return nil, nil
	case entry.Names != nil:
		return entry.Names(&r.Input), nil
	case entry.Args != nil:
		return nil, status.Errorf(codes.PermissionDenied, "%s: reads objects it does not declare; only the operator, owners and global admins may ask", r.Action)
	}
	return nil, nil
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
