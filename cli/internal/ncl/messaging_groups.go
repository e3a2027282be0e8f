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

// messagingGroupViews are how a chat prints.
var messagingGroupViews = []render.View{
	render.For[*guardv1.MessagingGroup](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.MessagingGroup).GetId),
			render.C("CHANNEL", (*guardv1.MessagingGroup).GetChannelType),
			render.C("PLATFORM ID", (*guardv1.MessagingGroup).GetPlatformId),
			render.C("NAME", (*guardv1.MessagingGroup).GetName),
			render.C("UNKNOWN SENDERS", func(m *guardv1.MessagingGroup) string { return enumword.String(m.GetUnknownSenderPolicy()) }),
			render.C("GROUP CHAT", func(m *guardv1.MessagingGroup) string { return render.YesNo(m.GetIsGroup()) }),
			render.C("DENIED", func(m *guardv1.MessagingGroup) string { return render.YesNo(m.GetDenied()) }),
		},
		Detail: []render.Col{render.C("CREATED", func(m *guardv1.MessagingGroup) string { return render.Time(m.GetCreatedAt()) })},
		ID:     render.IDOf((*guardv1.MessagingGroup).GetId),
	}),
}

// Chats in the document, by their channel and platform id (the server's id
// is not in it); a chat's kind (group chat or DM) and a rejected
// registration are the server's, never changed by apply.

var messagingGroupsState = &statePart{read: readMessagingGroups, plan: planMessagingGroups, check: checkMessagingGroups, sort: sortMessagingGroups}

// A chat the bridges route, named by its channel and platform id (the
// server's id is not in the document).
type messagingGroupSpec struct {
	ChannelType         string `yaml:"channelType"`
	PlatformID          string `yaml:"platformId"`
	Name                string `yaml:"name,omitempty"`
	UnknownSenderPolicy string `yaml:"unknownSenderPolicy,omitempty"`
	GroupChat           bool   `yaml:"groupChat,omitempty"`
	// Denied: a registration of this chat was rejected. Only the server
	// sets it; the document carries it so a round trip changes nothing.
	Denied bool `yaml:"denied,omitempty"`
}

func (m messagingGroupSpec) key() string {
	return m.ChannelType + "/" + m.PlatformID
}

// readMessagingGroups reads every chat and books its key.
func readMessagingGroups(ctx context.Context, c *clients, s *state, book groupBook) error {
	chats, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListMessagingGroups(ctx, &guardv1.ListMessagingGroupsRequest{Limit: size, PageToken: token})
		return msgs(r.GetMessagingGroups()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read messaging groups: %w", err)
	}
	for _, m := range chats {
		mg := m.(*guardv1.MessagingGroup)
		spec := messagingGroupSpec{ChannelType: mg.GetChannelType(), PlatformID: mg.GetPlatformId(), Name: mg.GetName(),
			UnknownSenderPolicy: enumword.String(mg.GetUnknownSenderPolicy()), GroupChat: mg.GetIsGroup(), Denied: mg.GetDenied()}
		if other, dup := book.chat[spec.key()]; dup {
			return fmt.Errorf("messaging groups %s and %s are both %s", other, mg.GetId(), spec.key())
		}
		book.chat[spec.key()], book.key[mg.GetId()] = mg.GetId(), spec.key()
		s.MessagingGroups = append(s.MessagingGroups, spec)
	}
	return nil
}

func planMessagingGroups(cur, want *state) (p planned) {
	// Messaging groups (chats); a chat's kind (group chat or DM) and a
	// rejected registration are the server's, never changed by apply.
	chats := map[string]messagingGroupSpec{}
	for _, m := range cur.MessagingGroups {
		chats[m.key()] = m
	}
	for _, m := range want.MessagingGroups {
		old, ok := chats[m.key()]
		if !ok {
			p.changes = append(p.changes, change{'+', "messaging group " + m.key() + named(m.Name), func(ctx context.Context, c *clients, book groupBook) error {
				if m.Denied {
					return fmt.Errorf("messaging group %s: denied is set by rejecting a registration, not by apply", m.key())
				}
				pol, err := senderPolicy(m.UnknownSenderPolicy)
				if err != nil {
					return fmt.Errorf("messaging group %s: %w", m.key(), err)
				}
				r, err := c.reg.CreateMessagingGroup(ctx, &guardv1.CreateMessagingGroupRequest{ChannelType: m.ChannelType, PlatformId: m.PlatformID,
					Name: m.Name, UnknownSenderPolicy: pol, IsGroup: m.GroupChat})
				if err == nil {
					book.chat[m.key()], book.key[r.GetMessagingGroup().GetId()] = r.GetMessagingGroup().GetId(), m.key()
				}
				return err
			}})
			continue
		}
		if old.GroupChat != m.GroupChat || old.Denied != m.Denied {
			p.changes = append(p.changes, change{'~', fmt.Sprintf("messaging group %s: groupChat %v → %v, denied %v → %v", m.key(), old.GroupChat, m.GroupChat, old.Denied, m.Denied),
				func(context.Context, *clients, groupBook) error {
					return fmt.Errorf("messaging group %s: groupChat and denied are the server's; delete the chat (--prune) to change them", m.key())
				}})
		}
		// An empty name or policy leaves the server's as it is (the API
		// cannot clear a name; the policy's default is the server's).
		if (m.Name != "" && old.Name != m.Name) || (m.UnknownSenderPolicy != "" && old.UnknownSenderPolicy != m.UnknownSenderPolicy) {
			p.changes = append(p.changes, change{'~', fmt.Sprintf("messaging group %s: name %q → %q, unknownSenderPolicy %s → %s", m.key(), old.Name, m.Name, old.UnknownSenderPolicy, m.UnknownSenderPolicy),
				func(ctx context.Context, c *clients, book groupBook) error {
					pol, err := senderPolicy(m.UnknownSenderPolicy)
					if err != nil {
						return fmt.Errorf("messaging group %s: %w", m.key(), err)
					}
					_, err = c.reg.UpdateMessagingGroup(ctx, &guardv1.UpdateMessagingGroupRequest{Id: book.chatID(m.key()), Name: m.Name, UnknownSenderPolicy: pol})
					return err
				}})
		}
	}
	for _, m := range cur.MessagingGroups {
		if !slices.ContainsFunc(want.MessagingGroups, func(w messagingGroupSpec) bool { return w.key() == m.key() }) {
			p.dels = append(p.dels, change{'-', "messaging group " + m.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.DeleteMessagingGroup(ctx, &guardv1.DeleteMessagingGroupRequest{Id: book.chatID(m.key())})
				return err
			}})
		}
	}

	return p
}

// senderPolicy is an unknownSenderPolicy word; empty is the server's default.
func senderPolicy(word string) (guardv1.SenderPolicy, error) {
	if word == "" {
		return guardv1.SenderPolicy_SENDER_POLICY_UNSPECIFIED, nil
	}
	p, err := enumword.Parse[guardv1.SenderPolicy](word)
	if err != nil {
		return 0, fmt.Errorf("unknownSenderPolicy: %w", err)
	}
	return p, nil
}

func checkMessagingGroups(s *state, once func(kind, key string) error) (err error) {
	for _, m := range s.MessagingGroups {
		if m.ChannelType == "" || m.PlatformID == "" {
			err = firstErr(err, fmt.Errorf("messaging group %q: channelType and platformId are required", m.key()))
		}
		err = firstErr(err, once("messaging group", m.key()))
	}
	return err
}

func sortMessagingGroups(s *state) {
	slices.SortFunc(s.MessagingGroups, func(a, b messagingGroupSpec) int { return strings.Compare(a.key(), b.key()) })
}
