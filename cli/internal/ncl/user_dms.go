package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) userDmsCmd() *cobra.Command {
	var luser string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List where approval cards reach users", Example: "  ncl user-dms list --user telegram:dana", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.userArgs(&luser)
			return a.listPages(cmd, &guardv1.UserDm{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListUserDms(ctx, &guardv1.ListUserDmsRequest{UserId: luser, Limit: size, PageToken: token})
				return render.Msgs(resp.GetDms()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&luser, "user", "", "only this user")
	var req guardv1.SetUserDmRequest
	set := &cobra.Command{
		Use: "set", Short: "Record a user's DM address on a channel",
		Example: "  ncl user-dms set --user telegram:dana --channel-type telegram --address 123456", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.userArgs(&req.UserId)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.SetUserDm(ctx, &req)
				return resp.GetDm(), err
			})
		},
	}
	set.Flags().StringVar(&req.UserId, "user", "", "user id")
	set.Flags().StringVar(&req.ChannelType, "channel-type", "", "channel type")
	set.Flags().StringVar(&req.Address, "address", "", "DM address on that channel")
	required(set, "user", "channel-type", "address")
	var ruser, rchan string
	remove := &cobra.Command{
		Use: "remove", Short: "Forget a user's DM address", Example: "  ncl user-dms remove --user telegram:dana --channel-type telegram", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			who := ruser
			a.userArgs(&ruser)
			return a.done(cmd, fmt.Sprintf("removed %s DM of %s", rchan, who), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemoveUserDm(ctx, &guardv1.RemoveUserDmRequest{UserId: ruser, ChannelType: rchan})
				return err
			})
		},
	}
	remove.Flags().StringVar(&ruser, "user", "", "user id")
	remove.Flags().StringVar(&rchan, "channel-type", "", "channel type")
	required(remove, "user", "channel-type")
	return noun("user-dms", "Where approval cards are delivered to users", "  ncl user-dms set --user telegram:dana --channel-type telegram --address 123456", list, set, remove)
}

// userDMViews are how a user's direct-message address prints.
var userDMViews = []render.View{
	render.For[*guardv1.UserDm](render.View{
		Cols: []render.Col{
			render.C("USER", (*guardv1.UserDm).GetUserId),
			render.CX("NAME", func(d *guardv1.UserDm, e render.Env) string { return e.UserName(d.GetUserId()) }),
			render.C("CHANNEL", (*guardv1.UserDm).GetChannelType),
			render.C("ADDRESS", (*guardv1.UserDm).GetAddress),
		},
		ID: render.IDOf((*guardv1.UserDm).GetUserId),
	}),
}
