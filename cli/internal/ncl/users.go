package ncl

import (
	"context"

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
	return noun("users", "Users (humans, namespaced <channel>:<handle>)", "  ncl users create telegram:alice --display-name Alice", list, get, create, update)
}
