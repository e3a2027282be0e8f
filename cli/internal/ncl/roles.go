package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) rolesCmd() *cobra.Command {
	var luser, lgroup string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List role grants", Example: "  ncl roles list --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			a.userArgs(&luser)
			return a.listPages(cmd, &guardv1.RoleGrant{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListRoles(ctx, &guardv1.ListRolesRequest{UserId: luser, Group: lgroup, Limit: size, PageToken: token})
				return render.Msgs(resp.GetRoles()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&luser, "user", "", "only grants of this user")
	list.Flags().StringVar(&lgroup, "group", "", "only grants scoped to this group")
	grant := a.roleChange("grant", "Grant a role (owner or admin) globally or for one group",
		"  ncl roles grant --user telegram:alice --role admin --scope group --group research\n  ncl roles grant --user telegram:olga --role owner --scope global",
		func(ctx context.Context, c *clients, u string, r guardv1.Role, s guardv1.RoleScope, g string) (proto.Message, error) {
			resp, err := c.reg.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: u, Role: r, Scope: s, Group: g})
			return resp.GetGrant(), err
		})
	revoke := a.roleChange("revoke", "Revoke a role grant",
		"  ncl roles revoke --user telegram:alice --role admin --scope group --group research",
		func(ctx context.Context, c *clients, u string, r guardv1.Role, s guardv1.RoleScope, g string) (proto.Message, error) {
			_, err := c.reg.RevokeRole(ctx, &guardv1.RevokeRoleRequest{UserId: u, Role: r, Scope: s, Group: g})
			return nil, err
		})
	return noun("roles", "Owner and admin roles (who may approve what)",
		"  ncl roles grant --user telegram:alice --role admin --scope group --group research", list, grant, revoke)
}

// roleChange builds grant and revoke: the scope is always explicit, and a
// group scope needs its group (a forgotten --group must never widen a grant).
func (a *app) roleChange(verb, short, example string, call func(context.Context, *clients, string, guardv1.Role, guardv1.RoleScope, string) (proto.Message, error)) *cobra.Command {
	var user, grp string
	cmd := &cobra.Command{Use: verb, Short: short, Example: example, Args: none}
	role := enumVar(cmd, "role", roleEnum, "role")
	scope := enumVar(cmd, "scope", roleScopeEnum, "scope of the role")
	cmd.Flags().StringVar(&user, "user", "", "user id (<channel>:<handle>)")
	cmd.Flags().StringVar(&grp, "group", "", "agent group (with --scope group)")
	required(cmd, "user", "role", "scope")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s := guardv1.RoleScope(scope.val)
		switch {
		case s == guardv1.RoleScope_ROLE_SCOPE_GROUP && grp == "":
			return usagef("--scope group needs --group <id>")
		case s == guardv1.RoleScope_ROLE_SCOPE_GLOBAL && grp != "":
			return usagef("--scope global takes no --group (did you mean --scope group?)")
		}
		r := guardv1.Role(role.val)
		a.groupArgs(&grp)
		a.userArgs(&user)
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			m, err := call(ctx, c, user, r, s, grp)
			if err != nil {
				return err
			}
			if m != nil {
				return a.printer().Object(m)
			}
			where := "globally"
			if grp != "" {
				where = "in group " + grp
			}
			return a.printer().Done(fmt.Sprintf("revoked %s of %s %s", enumword.String(r), user, where))
		})
	}
	return cmd
}

// roleViews are how a role grant prints.
var roleViews = []render.View{
	render.For[*guardv1.RoleGrant](render.View{
		Cols: []render.Col{
			render.C("USER", (*guardv1.RoleGrant).GetUserId),
			render.CX("NAME", func(r *guardv1.RoleGrant, e render.Env) string { return e.UserName(r.GetUserId()) }),
			render.C("ROLE", func(r *guardv1.RoleGrant) string { return enumword.String(r.GetRole()) }),
			render.C("SCOPE", func(r *guardv1.RoleGrant) string { return enumword.String(r.GetScope()) }),
			render.CX("GROUP", func(r *guardv1.RoleGrant, e render.Env) string { return e.Group(r.GetGroup()) }),
			render.Wide(render.C("GROUP ID", (*guardv1.RoleGrant).GetGroup)),
			render.C("GRANTED", func(r *guardv1.RoleGrant) string { return render.Time(r.GetGrantedAt()) }),
		},
		ID: render.IDOf((*guardv1.RoleGrant).GetUserId),
	}),
}

// Role grants in the document: a user's role, global or of a group (by
// name).

var rolesState = &statePart{read: readRoles, plan: planRoles, check: checkRoles, sort: sortRoles}

type roleSpec struct {
	User  string `yaml:"user"`
	Role  string `yaml:"role"`
	Scope string `yaml:"scope"`
	Group string `yaml:"group,omitempty"`
}

func (r roleSpec) key() string {
	if r.Scope == "group" {
		return r.User + " " + r.Role + " of " + r.Group
	}
	return r.User + " " + r.Role + " (" + r.Scope + ")"
}

// readRoles reads every role grant.
func readRoles(ctx context.Context, c *clients, s *state, book groupBook) error {
	roles, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListRoles(ctx, &guardv1.ListRolesRequest{Limit: size, PageToken: token})
		return msgs(r.GetRoles()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read roles: %w", err)
	}
	for _, m := range roles {
		r := m.(*guardv1.RoleGrant)
		spec := roleSpec{User: r.GetUserId(), Role: enumword.String(r.GetRole()), Scope: enumword.String(r.GetScope())}
		if r.GetGroup() != "" {
			spec.Group = book.nameOf(r.GetGroup())
		}
		s.Roles = append(s.Roles, spec)
	}
	return nil
}

func planRoles(cur, want *state) (p planned) {
	// Roles.
	for _, r := range want.Roles {
		if slices.ContainsFunc(cur.Roles, func(o roleSpec) bool { return o.key() == r.key() }) {
			continue
		}
		p.changes = append(p.changes, change{'+', "role " + r.key(), func(ctx context.Context, c *clients, book groupBook) error {
			req, err := roleRequest(r, book)
			if err != nil {
				return err
			}
			_, err = c.reg.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: req.UserId, Role: req.Role, Scope: req.Scope, Group: req.Group})
			return err
		}})
	}
	for _, r := range cur.Roles {
		if !slices.ContainsFunc(want.Roles, func(w roleSpec) bool { return w.key() == r.key() }) {
			p.dels = append(p.dels, change{'-', "role " + r.key(), func(ctx context.Context, c *clients, book groupBook) error {
				req, err := roleRequest(r, book)
				if err != nil {
					return err
				}
				_, err = c.reg.RevokeRole(ctx, req)
				return err
			}})
		}
	}

	return p
}

func checkRoles(s *state, once func(kind, key string) error) (err error) {
	for _, r := range s.Roles {
		err = firstErr(err, once("role", r.key()))
	}
	return err
}

func sortRoles(s *state) {
	slices.SortFunc(s.Roles, func(a, b roleSpec) int { return strings.Compare(a.key(), b.key()) })
}

func roleRequest(r roleSpec, book groupBook) (*guardv1.RevokeRoleRequest, error) {
	role, err := enumword.Parse[guardv1.Role](r.Role)
	if err != nil {
		return nil, fmt.Errorf("role %s: %w", r.key(), err)
	}
	scope, err := enumword.Parse[guardv1.RoleScope](r.Scope)
	if err != nil {
		return nil, fmt.Errorf("role %s: scope: %w", r.key(), err)
	}
	req := &guardv1.RevokeRoleRequest{UserId: r.User, Role: role, Scope: scope}
	if r.Group != "" {
		req.Group = idOr(book, r.Group)
	}
	return req, nil
}
