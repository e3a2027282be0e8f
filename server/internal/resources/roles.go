package resources

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

// roleGrant is a validated grant: the scope is always explicit — GLOBAL
// with no group, GROUP with one; an owner is only ever global. Anything else
// is InvalidArgument, never a silent global grant.
type roleGrant struct {
	user, role, group string // group "" = global
}

func validGrant(userID string, role guardv1.Role, scope guardv1.RoleScope, group string) (roleGrant, error) {
	g := roleGrant{user: userID}
	if err := required("user_id", userID); err != nil {
		return g, err
	}
	var err error
	if g.role, err = enumColumn("role", role); err != nil {
		return g, err
	}
	if g.role == "" {
		return g, invalid("role", "required: owner or admin")
	}
	switch scope {
	case guardv1.RoleScope_ROLE_SCOPE_GLOBAL:
		if group != "" {
			return g, invalid("group", "must be empty for a global grant (use scope group)")
		}
	case guardv1.RoleScope_ROLE_SCOPE_GROUP:
		if g.role == "owner" {
			return g, invalid("scope", "owner is always global")
		}
		if group == "" {
			return g, invalid("group", "required for a group-scoped grant")
		}
		g.group = group
	case guardv1.RoleScope_ROLE_SCOPE_UNSPECIFIED:
		return g, invalid("scope", "required: global or group (never implied)")
	default:
		return g, invalid("scope", "unknown value %d (want global or group)", scope)
	}
	return g, nil
}

func scanRole(row pgx.Row) (*guardv1.RoleGrant, error) {
	var (
		r       guardv1.RoleGrant
		role    string
		granted time.Time
	)
	if err := row.Scan(&r.UserId, &role, &r.Group, &granted); err != nil {
		return nil, err
	}
	var err error
	if r.Role, err = enumFromColumn[guardv1.Role]("role", role); err != nil {
		return nil, fmt.Errorf("role of %s: %w", r.UserId, err)
	}
	r.Scope = guardv1.RoleScope_ROLE_SCOPE_GLOBAL
	if r.Group != "" {
		r.Scope = guardv1.RoleScope_ROLE_SCOPE_GROUP
	}
	r.GrantedAt = ts(granted)
	return &r, nil
}

const roleColumns = `user_id, role, COALESCE(agent_group_id, ''), granted_at`

// ListRoles lists grants, optionally of one user or one group. A restricted
// viewer sees the grants of its groups and its own.
func (s *Service) ListRoles(ctx context.Context, req *guardv1.ListRolesRequest) (_ *guardv1.ListRolesResponse, err error) {
	defer store.Faulted(&err, "role grants")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (user_id, role, group; '' = global sorts first, as
	// NULLS FIRST did), bound to the filters and the viewer.
	filter := paging.Filter("roles", v.all, v.groups, v.userID, req.GetUserId(), req.GetGroup())
	cur, err := paging.DecodeKeys(req.GetPageToken(), filter, 3)
	if err != nil {
		return nil, err
	}
	after := []string{"", "", ""}
	if cur != nil {
		after = cur.Keys
	}
	rows, err := s.pool.Query(ctx, `SELECT `+roleColumns+` FROM user_roles
		WHERE ($1 OR agent_group_id = ANY($2) OR user_id = $3)
		  AND ($4 = '' OR user_id = $4) AND ($5 = '' OR agent_group_id = $5)
		  AND (NOT $6 OR (user_id, role, COALESCE(agent_group_id, '')) > ($7, $8, $9))
		ORDER BY user_id, role, COALESCE(agent_group_id, '') LIMIT $10`,
		v.all, v.groups, v.userID, req.GetUserId(), req.GetGroup(), cur != nil, after[0], after[1], after[2], limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListRolesResponse{}
	for rows.Next() {
		if len(out.Roles) == limit {
			// One row past the page: there is a next one.
			last := out.Roles[limit-1]
			role := "admin"
			if last.GetRole() == guardv1.Role_ROLE_OWNER {
				role = "owner"
			}
			out.NextPageToken = paging.NextKeys(filter, last.GetUserId(), role, last.GetGroup())
			break
		}
		r, err := scanRole(rows)
		if err != nil {
			return nil, err
		}
		out.Roles = append(out.Roles, r)
	}
	return out, rows.Err()
}

// GrantRole grants a role with an explicit scope; the user (and group) must
// exist; a duplicate grant is AlreadyExists.
func (s *Service) GrantRole(ctx context.Context, req *guardv1.GrantRoleRequest) (_ *guardv1.GrantRoleResponse, err error) {
	defer store.Faulted(&err, "role grant")
	g, err := validGrant(req.GetUserId(), req.GetRole(), req.GetScope(), req.GetGroup())
	if err != nil {
		return nil, err
	}
	r, err := scanRole(s.pool.QueryRow(ctx, `INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ($1, $2, NULLIF($3, ''))
		RETURNING `+roleColumns, g.user, g.role, g.group))
	if err != nil {
		return nil, err
	}
	return &guardv1.GrantRoleResponse{Grant: r}, nil
}

// RevokeRole revokes exactly the named grant (same explicit scope rules).
func (s *Service) RevokeRole(ctx context.Context, req *guardv1.RevokeRoleRequest) (_ *guardv1.RevokeRoleResponse, err error) {
	defer store.Faulted(&err, "role grant")
	g, err := validGrant(req.GetUserId(), req.GetRole(), req.GetScope(), req.GetGroup())
	if err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM user_roles WHERE user_id = $1 AND role = $2 AND agent_group_id IS NOT DISTINCT FROM NULLIF($3, '')`,
		g.user, g.role, g.group)
	if err := affected(tag, err, "user %q has no such %s grant", g.user, g.role); err != nil {
		return nil, err
	}
	return &guardv1.RevokeRoleResponse{}, nil
}
