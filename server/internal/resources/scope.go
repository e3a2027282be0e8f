package resources

import (
	"context"
	"fmt"
	"slices"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
)

// viewer is what a caller may read. Kept deliberately simple:
//
//   - operator: everything.
//   - agent (a runner acting for a session): with cli_scope "global",
//     everything; otherwise only its own
//     group's rows — another group's group or session reads as NotFound,
//     like the seed's dispatch filter.
//   - user: owners and global admins read everything; a scoped admin of G
//     reads G's group-scoped rows; every user reads their own user record,
//     role grants and DMs. Nothing else.
//   - a runner without an agent, a bridge: nothing here.
//
// Group-less resources (users, runners, tokens) need a viewer that sees all;
// the catalog is readable by every authenticated caller. Secrets (an MCP
// server's environment) are nobody's to read here: every answer is redacted
// at the API edge (api/redact.go), whoever reads it.
type viewer struct {
	all    bool
	groups []string // readable groups when !all (never nil: SQL ANY wants an array)
	userID string   // user callers
}

func (v viewer) sees(group string) bool { return v.all || slices.Contains(v.groups, group) }

// requireAll refuses a restricted viewer reading a group-less resource.
func (v viewer) requireAll(what string) error {
	if v.all {
		return nil
	}
	return fault.Deniedf("reading %s needs the operator, an owner or a global admin", what)
}

func (s *Service) viewer(ctx context.Context) (viewer, error) {
	c, ok := authn.FromContext(ctx)
	if !ok {
		return viewer{}, fault.New(fault.Unauthenticated, "unauthenticated")
	}
	v := viewer{groups: []string{}}
	switch {
	case c.Principal.Kind == guardv1.Principal_PRINCIPAL_OPERATOR:
		v.all = true
	case c.Agent != nil:
		var scope string
		err := s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT cli_scope FROM container_configs WHERE agent_group_id = $1), 'group')`,
			c.Agent.GroupID).Scan(&scope)
		if err != nil {
			return viewer{}, fmt.Errorf("read cli scope: %w", err)
		}
		v.all = scope == "global"
		v.groups = []string{c.Agent.GroupID}
	case c.Principal.Kind == guardv1.Principal_PRINCIPAL_USER:
		v.userID = c.Principal.UserID
		rows, err := s.pool.Query(ctx, `SELECT role, COALESCE(agent_group_id, '') FROM user_roles WHERE user_id = $1`, c.Principal.UserID)
		if err != nil {
			return viewer{}, fmt.Errorf("read roles: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var role, group string
			if err := rows.Scan(&role, &group); err != nil {
				return viewer{}, fmt.Errorf("read roles: %w", err)
			}
			if group == "" {
				v.all = true // owner, or global admin
			} else {
				v.groups = append(v.groups, group)
			}
		}
		if err := rows.Err(); err != nil {
			return viewer{}, fmt.Errorf("read roles: %w", err)
		}
	default:
		return viewer{}, fault.Deniedf("%s tokens read admin resources only for an agent session", enumword.String(c.Principal.Kind))
	}
	return v, nil
}
