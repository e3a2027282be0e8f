package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) destinationsCmd() *cobra.Command {
	var lgroup string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List where groups may send messages", Example: "  ncl destinations list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			return a.listPages(cmd, &guardv1.Destination{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: lgroup, Limit: size, PageToken: token})
				return render.Msgs(resp.GetDestinations()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&lgroup, "group", "", "only destinations of this group")
	var req guardv1.AddDestinationRequest
	add := &cobra.Command{
		Use: "add", Short: "Let a group message another group (or a messaging group) by name",
		Long: `Add a named destination to a group. Without a destination an agent's
a2a.send to another group is denied; with one it is allowed, or held for the
approver of a message policy on the pair (see: ncl policies set).`,
		Example: "  ncl destinations add --group research --name ops --target-group ops", Args: none,
	}
	add.Flags().StringVar(&req.Group, "group", "", "the sending group")
	add.Flags().StringVar(&req.Name, "name", "", "name the sending agents use")
	add.Flags().StringVar(&req.TargetGroup, "target-group", "", "receiving agent group")
	add.Flags().StringVar(&req.TargetMessagingGroup, "target-messaging-group", "", "receiving messaging group (instead of --target-group)")
	required(add, "group", "name")
	add.MarkFlagsOneRequired("target-group", "target-messaging-group")
	add.MarkFlagsMutuallyExclusive("target-group", "target-messaging-group")
	add.RunE = func(cmd *cobra.Command, _ []string) error {
		a.groupArgs(&req.Group, &req.TargetGroup)
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.AddDestination(ctx, &req)
			return resp.GetDestination(), err
		})
	}
	var rgroup, rname string
	remove := &cobra.Command{
		Use: "remove", Short: "Remove a destination", Example: "  ncl destinations remove --group research --name ops", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&rgroup)
			name := rgroup
			return a.done(cmd, fmt.Sprintf("removed destination %s of group %s", rname, name), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: rgroup, Name: rname})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rgroup, "group", "", "the sending group")
	remove.Flags().StringVar(&rname, "name", "", "destination name")
	required(remove, "group", "name")
	return noun("destinations", "Named message destinations of groups (agent-to-agent wiring)",
		"  ncl destinations add --group research --name ops --target-group ops", list, add, remove)
}
