package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) usersCmd() *cobra.Command {
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List users", Example: "  ncl users list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listPages(cmd, &guardv1.User{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListUsers(ctx, &guardv1.ListUsersRequest{Limit: size, PageToken: token})
				return render.Msgs(resp.GetUsers()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	get := &cobra.Command{
		Use: "get <id|name>", Short: "Show one user (by id, or by display name)", Example: "  ncl users get telegram:alice\n  ncl users get Alice", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.userArgs(&args[0])
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.GetUser(ctx, &guardv1.GetUserRequest{Id: args[0]})
				return resp.GetUser(), err
			})
		},
	}
	var cname, cid string
	create := &cobra.Command{
		Use: "create <id>", Short: "Create a user (<channel>:<handle>)",
		Example: "  ncl users create telegram:alice --display-name Alice\n  ncl users create --id telegram:alice   # the same",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("%s takes one <id>", cmd.CommandPath())
			case len(args) == 1 && cid != "" && cid != args[0]:
				return usagef("two different ids: %q and --id %q", args[0], cid)
			case len(args) == 0 && cid == "":
				return usagef("%s needs the user id: <id> or --id", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id := cid
			if len(args) == 1 {
				id = args[0]
			}
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.CreateUser(ctx, &guardv1.CreateUserRequest{Id: id, DisplayName: cname})
				return resp.GetUser(), err
			})
		},
	}
	create.Flags().StringVar(&cname, "display-name", "", "display name")
	create.Flags().StringVar(&cid, "id", "", "user id (instead of the argument)")
	var uname string
	update := &cobra.Command{
		Use: "update <id|name>", Short: "Change a user's display name", Example: "  ncl users update telegram:alice --display-name 'Alice B.'", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.userArgs(&args[0])
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.UpdateUser(ctx, &guardv1.UpdateUserRequest{Id: args[0], DisplayName: uname})
				return resp.GetUser(), err
			})
		},
	}
	update.Flags().StringVar(&uname, "display-name", "", "display name")
	required(update, "display-name")
	bind, unbind := a.oidcBindingCmds()
	return noun("users", "Users (humans, namespaced <channel>:<handle>)", "  ncl users create telegram:alice --display-name Alice", list, get, create, update, bind, unbind)
}

// oidcBindingCmds: bind-oidc and unbind-oidc, the operator's word that an
// identity provider's subject signs in to the console as a user.
func (a *app) oidcBindingCmds() (*cobra.Command, *cobra.Command) {
	var bIssuer, bSubject string
	bind := &cobra.Command{
		Use: "bind-oidc <id|name>", Short: "Let an OIDC identity (issuer + subject) sign in to the console as this user",
		Example: "  ncl users bind-oidc telegram:dana --issuer https://accounts.example.com --subject 248289761001", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.userArgs(&args[0])
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.BindOidc(ctx, &guardv1.BindOidcRequest{UserId: args[0], Issuer: bIssuer, Subject: bSubject})
				return resp.GetBinding(), err
			})
		},
	}
	bind.Flags().StringVar(&bIssuer, "issuer", "", "the identity provider's issuer URL, as its ID tokens carry it")
	bind.Flags().StringVar(&bSubject, "subject", "", "the ID token's sub claim")
	required(bind, "issuer", "subject")
	var uIssuer, uSubject string
	unbind := &cobra.Command{
		Use: "unbind-oidc <id|name>", Short: "Remove a user's OIDC binding (its console sessions end)",
		Example: "  ncl users unbind-oidc telegram:dana --issuer https://accounts.example.com --subject 248289761001", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			who := args[0]
			a.userArgs(&args[0])
			return a.done(cmd, fmt.Sprintf("unbound %s from %s", uSubject, who), func(ctx context.Context, c *clients) error {
				_, err := c.reg.UnbindOidc(ctx, &guardv1.UnbindOidcRequest{UserId: args[0], Issuer: uIssuer, Subject: uSubject})
				return err
			})
		},
	}
	unbind.Flags().StringVar(&uIssuer, "issuer", "", "the identity provider's issuer URL")
	unbind.Flags().StringVar(&uSubject, "subject", "", "the ID token's sub claim")
	required(unbind, "issuer", "subject")
	return bind, unbind
}
