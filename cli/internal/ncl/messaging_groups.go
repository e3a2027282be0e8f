package ncl

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) messagingGroupsCmd() *cobra.Command {
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List messaging groups (chats)", Example: "  ncl messaging-groups list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listPages(cmd, &guardv1.MessagingGroup{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListMessagingGroups(ctx, &guardv1.ListMessagingGroupsRequest{Limit: size, PageToken: token})
				return render.Msgs(resp.GetMessagingGroups()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	get := &cobra.Command{
		Use: "get <id>", Short: "Show one messaging group", Example: "  ncl messaging-groups get mg_5d0c8e2f1a9b3c47", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.GetMessagingGroup(ctx, &guardv1.GetMessagingGroupRequest{Id: args[0]})
				return resp.GetMessagingGroup(), err
			})
		},
	}
	var creq guardv1.CreateMessagingGroupRequest
	create := &cobra.Command{
		Use: "create", Short: "Register a chat as a messaging group",
		Example: "  ncl messaging-groups create --channel-type telegram --platform-id -100123 --name ops --unknown-sender-policy request_approval --group-chat",
		Args:    none,
	}
	cpol := enumVar(create, "unknown-sender-policy", senderPolicyEnum, "what happens to senders nobody admitted yet")
	create.Flags().StringVar(&creq.ChannelType, "channel-type", "", "channel type (telegram, slack, ...)")
	create.Flags().StringVar(&creq.PlatformId, "platform-id", "", "the chat's id on the platform")
	create.Flags().StringVar(&creq.Name, "name", "", "name")
	create.Flags().BoolVar(&creq.IsGroup, "group-chat", false, "the chat is a group chat (not a DM)")
	required(create, "channel-type", "platform-id")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		creq.UnknownSenderPolicy = guardv1.SenderPolicy(cpol.val)
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.CreateMessagingGroup(ctx, &creq)
			return resp.GetMessagingGroup(), err
		})
	}
	var uname string
	update := &cobra.Command{
		Use: "update <id>", Short: "Rename a messaging group or change its unknown-sender policy",
		Example: "  ncl messaging-groups update mg_5d0c8e2f1a9b3c47 --unknown-sender-policy strict", Args: one("id"),
	}
	upol := enumVar(update, "unknown-sender-policy", senderPolicyEnum, "what happens to senders nobody admitted yet")
	update.Flags().StringVar(&uname, "name", "", "new name")
	update.RunE = func(cmd *cobra.Command, args []string) error {
		if uname == "" && upol.val == 0 {
			return usagef("nothing to update: give --name or --unknown-sender-policy")
		}
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.UpdateMessagingGroup(ctx, &guardv1.UpdateMessagingGroupRequest{
				Id: args[0], Name: uname, UnknownSenderPolicy: guardv1.SenderPolicy(upol.val),
			})
			return resp.GetMessagingGroup(), err
		})
	}
	del := &cobra.Command{
		Use: "delete <id>", Short: "Delete a messaging group", Example: "  ncl messaging-groups delete mg_5d0c8e2f1a9b3c47", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.done(cmd, "deleted messaging group "+args[0], func(ctx context.Context, c *clients) error {
				_, err := c.reg.DeleteMessagingGroup(ctx, &guardv1.DeleteMessagingGroupRequest{Id: args[0]})
				return err
			})
		},
	}
	return noun("messaging-groups", "Chats known to the control plane", "  ncl messaging-groups list", list, get, create, update, del)
}
