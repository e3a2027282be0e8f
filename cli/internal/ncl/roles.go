package ncl

import (
	"context"
	"fmt"

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
