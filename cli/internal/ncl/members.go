package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) membersCmd() *cobra.Command {
	var lgroup string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List members of a group", Example: "  ncl members list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			return a.listPages(cmd, &guardv1.Member{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListMembers(ctx, &guardv1.ListMembersRequest{Group: lgroup, Limit: size, PageToken: token})
				return render.Msgs(resp.GetMembers()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&lgroup, "group", "", "the agent group")
	var agroup, auser string
	add := &cobra.Command{
		Use: "add", Short: "Add a user to a group", Example: "  ncl members add --group research --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&agroup)
			a.userArgs(&auser)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.AddMember(ctx, &guardv1.AddMemberRequest{Group: agroup, UserId: auser})
				return resp.GetMember(), err
			})
		},
	}
	add.Flags().StringVar(&agroup, "group", "", "the agent group")
	add.Flags().StringVar(&auser, "user", "", "user id (<channel>:<handle>)")
	required(add, "group", "user")
	var rgroup, ruser string
	remove := &cobra.Command{
		Use: "remove", Short: "Remove a user from a group", Example: "  ncl members remove --group research --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&rgroup)
			a.userArgs(&ruser)
			user, group := ruser, rgroup
			return a.done(cmd, fmt.Sprintf("removed %s from group %s", user, group), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemoveMember(ctx, &guardv1.RemoveMemberRequest{Group: rgroup, UserId: ruser})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rgroup, "group", "", "the agent group")
	remove.Flags().StringVar(&ruser, "user", "", "user id")
	required(remove, "group", "user")
	return noun("members", "Users who belong to an agent group", "  ncl members add --group research --user telegram:alice", list, add, remove)
}
