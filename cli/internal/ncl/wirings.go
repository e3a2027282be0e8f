package ncl

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) wiringsCmd() *cobra.Command {
	var lgroup, lmg string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List which messaging groups reach which agent groups", Example: "  ncl wirings list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			return a.listPages(cmd, &guardv1.Wiring{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListWirings(ctx, &guardv1.ListWiringsRequest{Group: lgroup, MessagingGroup: lmg, Limit: size, PageToken: token})
				return render.Msgs(resp.GetWirings()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&lgroup, "group", "", "only wirings to this agent group")
	list.Flags().StringVar(&lmg, "messaging-group", "", "only wirings from this messaging group")
	var cgroup, cmg string
	create := &cobra.Command{
		Use: "create", Short: "Wire a messaging group (a chat) to an agent group",
		Example: "  ncl wirings create --messaging-group mg_5d0c8e2f1a9b3c47 --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&cgroup)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: cmg, Group: cgroup})
				return resp.GetWiring(), err
			})
		},
	}
	create.Flags().StringVar(&cgroup, "group", "", "agent group")
	create.Flags().StringVar(&cmg, "messaging-group", "", "messaging group")
	required(create, "group", "messaging-group")
	del := &cobra.Command{
		Use: "delete <id>", Short: "Delete a wiring", Example: "  ncl wirings delete wi_123", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.done(cmd, "deleted wiring "+args[0], func(ctx context.Context, c *clients) error {
				_, err := c.reg.DeleteWiring(ctx, &guardv1.DeleteWiringRequest{Id: args[0]})
				return err
			})
		},
	}
	return noun("wirings", "Chats wired to agent groups", "  ncl wirings create --messaging-group mg_5d0c8e2f1a9b3c47 --group research", list, create, del)
}
