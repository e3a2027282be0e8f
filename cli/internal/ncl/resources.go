package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

var (
	roleEnum         = guardv1.Role(0).Descriptor()
	roleScopeEnum    = guardv1.RoleScope(0).Descriptor()
	senderPolicyEnum = guardv1.SenderPolicy(0).Descriptor()
	principalEnum    = guardv1.Principal(0).Descriptor()
)

func (a *app) sessionsCmd() *cobra.Command {
	var group, runner string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List sessions", Example: "  ncl sessions list --group ag_4888a21379a5cf01", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listLimit < 0 {
				return usagef("--limit: must not be negative")
			}
			return a.list(cmd, &guardv1.Session{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				return pages(ctx, c, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
					resp, err := c.reg.ListSessions(ctx, &guardv1.ListSessionsRequest{Group: group, RunnerId: runner, Limit: size, PageToken: token})
					return render.Msgs(resp.GetSessions()), resp.GetNextPageToken(), err
				})
			})
		},
	}
	list.Flags().Int32Var(&listLimit, "limit", 0, "at most this many (0 = all: every page is read)")
	list.Flags().StringVar(&group, "group", "", "only sessions of this agent group")
	list.Flags().StringVar(&runner, "runner", "", "only sessions on this runner")
	get := &cobra.Command{
		Use: "get <id>", Short: "Show one session", Example: "  ncl sessions get se_123", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.GetSession(ctx, &guardv1.GetSessionRequest{Id: args[0]})
				return resp.GetSession(), err
			})
		},
	}
	var limit int32
	history := &cobra.Command{
		Use: "history <id>", Short: "Show a session's message history", Example: "  ncl sessions history se_123 --limit 20", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.list(cmd, &guardv1.SessionEvent{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.GetSessionHistory(ctx, &guardv1.GetSessionHistoryRequest{Id: args[0], Limit: limit})
				return render.Msgs(resp.GetEvents()), err
			})
		},
	}
	history.Flags().Int32Var(&limit, "limit", 50, "at most this many events")
	return noun("sessions", "Agent sessions", "  ncl sessions list\n  ncl sessions history se_123", list, get, history)
}

func (a *app) destinationsCmd() *cobra.Command {
	var lgroup string
	list := &cobra.Command{
		Use: "list", Short: "List where groups may send messages", Example: "  ncl destinations list --group ag_4888a21379a5cf01", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.Destination{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: lgroup})
				return render.Msgs(resp.GetDestinations()), err
			})
		},
	}
	list.Flags().StringVar(&lgroup, "group", "", "only destinations of this group")
	var req guardv1.AddDestinationRequest
	add := &cobra.Command{
		Use: "add", Short: "Let a group message another group (or a messaging group) by name",
		Long: `Add a named destination to a group. Without a destination an agent's
a2a.send to another group is denied; with one it is allowed, or held for the
approver of a message policy on the pair (see: ncl policies set).`,
		Example: "  ncl destinations add --group ag_4888a21379a5cf01 --name b --target-group ag_19b61273c0b2e0e3", Args: none,
	}
	add.Flags().StringVar(&req.Group, "group", "", "the sending group")
	add.Flags().StringVar(&req.Name, "name", "", "name the sending agents use")
	add.Flags().StringVar(&req.TargetGroup, "target-group", "", "receiving agent group")
	add.Flags().StringVar(&req.TargetMessagingGroup, "target-messaging-group", "", "receiving messaging group (instead of --target-group)")
	required(add, "group", "name")
	add.MarkFlagsOneRequired("target-group", "target-messaging-group")
	add.MarkFlagsMutuallyExclusive("target-group", "target-messaging-group")
	add.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.AddDestination(ctx, &req)
			return resp.GetDestination(), err
		})
	}
	var rgroup, rname string
	remove := &cobra.Command{
		Use: "remove", Short: "Remove a destination", Example: "  ncl destinations remove --group ag_4888a21379a5cf01 --name b", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.done(cmd, fmt.Sprintf("removed destination %s of group %s", rname, rgroup), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: rgroup, Name: rname})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rgroup, "group", "", "the sending group")
	remove.Flags().StringVar(&rname, "name", "", "destination name")
	required(remove, "group", "name")
	return noun("destinations", "Named message destinations of groups (agent-to-agent wiring)",
		"  ncl destinations add --group ag_4888a21379a5cf01 --name b --target-group ag_19b61273c0b2e0e3", list, add, remove)
}

func (a *app) membersCmd() *cobra.Command {
	var lgroup string
	list := &cobra.Command{
		Use: "list", Short: "List members of a group", Example: "  ncl members list --group ag_4888a21379a5cf01", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.Member{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListMembers(ctx, &guardv1.ListMembersRequest{Group: lgroup})
				return render.Msgs(resp.GetMembers()), err
			})
		},
	}
	list.Flags().StringVar(&lgroup, "group", "", "the agent group")
	var agroup, auser string
	add := &cobra.Command{
		Use: "add", Short: "Add a user to a group", Example: "  ncl members add --group ag_4888a21379a5cf01 --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
		Use: "remove", Short: "Remove a user from a group", Example: "  ncl members remove --group ag_4888a21379a5cf01 --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.done(cmd, fmt.Sprintf("removed %s from group %s", ruser, rgroup), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemoveMember(ctx, &guardv1.RemoveMemberRequest{Group: rgroup, UserId: ruser})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rgroup, "group", "", "the agent group")
	remove.Flags().StringVar(&ruser, "user", "", "user id")
	required(remove, "group", "user")
	return noun("members", "Users who belong to an agent group", "  ncl members add --group ag_4888a21379a5cf01 --user telegram:alice", list, add, remove)
}

func (a *app) rolesCmd() *cobra.Command {
	var luser, lgroup string
	list := &cobra.Command{
		Use: "list", Short: "List role grants", Example: "  ncl roles list --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.RoleGrant{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListRoles(ctx, &guardv1.ListRolesRequest{UserId: luser, Group: lgroup})
				return render.Msgs(resp.GetRoles()), err
			})
		},
	}
	list.Flags().StringVar(&luser, "user", "", "only grants of this user")
	list.Flags().StringVar(&lgroup, "group", "", "only grants scoped to this group")
	grant := a.roleChange("grant", "Grant a role (owner or admin) globally or for one group",
		"  ncl roles grant --user telegram:alice --role admin --scope group --group ag_4888a21379a5cf01\n  ncl roles grant --user telegram:olga --role owner --scope global",
		func(ctx context.Context, c *clients, u string, r guardv1.Role, s guardv1.RoleScope, g string) (proto.Message, error) {
			resp, err := c.reg.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: u, Role: r, Scope: s, Group: g})
			return resp.GetGrant(), err
		})
	revoke := a.roleChange("revoke", "Revoke a role grant",
		"  ncl roles revoke --user telegram:alice --role admin --scope group --group ag_4888a21379a5cf01",
		func(ctx context.Context, c *clients, u string, r guardv1.Role, s guardv1.RoleScope, g string) (proto.Message, error) {
			_, err := c.reg.RevokeRole(ctx, &guardv1.RevokeRoleRequest{UserId: u, Role: r, Scope: s, Group: g})
			return nil, err
		})
	return noun("roles", "Owner and admin roles (who may approve what)",
		"  ncl roles grant --user telegram:alice --role admin --scope group --group ag_4888a21379a5cf01", list, grant, revoke)
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
			return a.printer().Done(fmt.Sprintf("revoked %s of %s %s", render.EnumWord(r), user, where))
		})
	}
	return cmd
}

func (a *app) usersCmd() *cobra.Command {
	list := &cobra.Command{
		Use: "list", Short: "List users", Example: "  ncl users list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.User{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListUsers(ctx, &guardv1.ListUsersRequest{})
				return render.Msgs(resp.GetUsers()), err
			})
		},
	}
	get := &cobra.Command{
		Use: "get <id>", Short: "Show one user", Example: "  ncl users get telegram:alice", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
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
		Use: "update <id>", Short: "Change a user's display name", Example: "  ncl users update telegram:alice --display-name 'Alice B.'", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
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

func (a *app) wiringsCmd() *cobra.Command {
	var lgroup, lmg string
	list := &cobra.Command{
		Use: "list", Short: "List which messaging groups reach which agent groups", Example: "  ncl wirings list --group ag_4888a21379a5cf01", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.Wiring{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListWirings(ctx, &guardv1.ListWiringsRequest{Group: lgroup, MessagingGroup: lmg})
				return render.Msgs(resp.GetWirings()), err
			})
		},
	}
	list.Flags().StringVar(&lgroup, "group", "", "only wirings to this agent group")
	list.Flags().StringVar(&lmg, "messaging-group", "", "only wirings from this messaging group")
	var cgroup, cmg string
	create := &cobra.Command{
		Use: "create", Short: "Wire a messaging group (a chat) to an agent group",
		Example: "  ncl wirings create --messaging-group mg_5d0c8e2f1a9b3c47 --group ag_4888a21379a5cf01", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	return noun("wirings", "Chats wired to agent groups", "  ncl wirings create --messaging-group mg_5d0c8e2f1a9b3c47 --group ag_4888a21379a5cf01", list, create, del)
}

func (a *app) messagingGroupsCmd() *cobra.Command {
	list := &cobra.Command{
		Use: "list", Short: "List messaging groups (chats)", Example: "  ncl messaging-groups list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.MessagingGroup{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListMessagingGroups(ctx, &guardv1.ListMessagingGroupsRequest{})
				return render.Msgs(resp.GetMessagingGroups()), err
			})
		},
	}
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

func (a *app) policiesCmd() *cobra.Command {
	var lgroup string
	list := &cobra.Command{
		Use: "list", Short: "List message policies", Example: "  ncl policies list --group ag_4888a21379a5cf01", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.MessagePolicy{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListPolicies(ctx, &guardv1.ListPoliciesRequest{Group: lgroup})
				return render.Msgs(resp.GetPolicies()), err
			})
		},
	}
	list.Flags().StringVar(&lgroup, "group", "", "only policies from or to this group")
	var (
		from, to, pmode string
		approvers       []string
		papprovals      int32
	)
	set := &cobra.Command{
		Use: "set", Short: "Hold messages from one group to another for one approver",
		Long: `Set a message policy: every a2a.send from --from to --to is held until
--approver (and only that user — not even an owner) approves it. The pair
still needs a destination (ncl destinations add), or the send is denied.

Repeat --approver to name several and give --approvals N for a quorum: the
message then needs N of the named approvers (each counted once; one reject
rejects).

--mode rolls a new policy out without breaking agents: audit lets the send
run and logs that it would have been held; warn also tells the agent and the
group's admins; enforce holds. Unset, the policy follows a2a.send's mode
(ncl catalog set).`,
		Example: "  ncl policies set --from ag_4888a21379a5cf01 --to ag_19b61273c0b2e0e3 --approver telegram:dana\n  ncl policies set --from ag_4888a21379a5cf01 --to ag_19b61273c0b2e0e3 --approver telegram:dana --approver telegram:erin --approvals 2\n  ncl policies set --from ag_4888a21379a5cf01 --to ag_19b61273c0b2e0e3 --approver telegram:dana --mode audit", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := parseMode(pmode)
			if err != nil {
				return err
			}
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: from, ToGroup: to,
					ApproverUserId: approvers[0], AlsoApproverUserIds: approvers[1:], Approvals: papprovals, Mode: mode})
				return resp.GetPolicy(), err
			})
		},
	}
	set.Flags().StringVar(&from, "from", "", "sending group")
	set.Flags().StringVar(&to, "to", "", "receiving group")
	set.Flags().StringArrayVar(&approvers, "approver", nil, "a user who approves (<channel>:<handle>); repeat for several")
	set.Flags().Int32Var(&papprovals, "approvals", 0, "distinct approvals a message needs (quorum; 0 = one)")
	set.Flags().StringVar(&pmode, "mode", "", "enforce, audit or warn (unset: a2a.send's mode)")
	required(set, "from", "to", "approver")
	var rfrom, rto string
	remove := &cobra.Command{
		Use: "remove", Short: "Remove a message policy", Example: "  ncl policies remove --from ag_4888a21379a5cf01 --to ag_19b61273c0b2e0e3", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.done(cmd, fmt.Sprintf("removed policy %s → %s", rfrom, rto), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemovePolicy(ctx, &guardv1.RemovePolicyRequest{FromGroup: rfrom, ToGroup: rto})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rfrom, "from", "", "sending group")
	remove.Flags().StringVar(&rto, "to", "", "receiving group")
	required(remove, "from", "to")
	return noun("policies", "Message policies: agent-to-agent sends held for one approver",
		"  ncl policies set --from ag_4888a21379a5cf01 --to ag_19b61273c0b2e0e3 --approver telegram:dana", list, set, remove)
}

func (a *app) userDmsCmd() *cobra.Command {
	var luser string
	list := &cobra.Command{
		Use: "list", Short: "List where approval cards reach users", Example: "  ncl user-dms list --user telegram:dana", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.UserDm{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.ListUserDms(ctx, &guardv1.ListUserDmsRequest{UserId: luser})
				return render.Msgs(resp.GetDms()), err
			})
		},
	}
	list.Flags().StringVar(&luser, "user", "", "only this user")
	var req guardv1.SetUserDmRequest
	set := &cobra.Command{
		Use: "set", Short: "Record a user's DM address on a channel",
		Example: "  ncl user-dms set --user telegram:dana --channel-type telegram --address 123456", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			return a.done(cmd, fmt.Sprintf("removed %s DM of %s", rchan, ruser), func(ctx context.Context, c *clients) error {
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
