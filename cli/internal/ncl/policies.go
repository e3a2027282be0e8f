package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) policiesCmd() *cobra.Command {
	var lgroup string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List message policies", Example: "  ncl policies list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			return a.listPages(cmd, &guardv1.MessagePolicy{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListPolicies(ctx, &guardv1.ListPoliciesRequest{Group: lgroup, Limit: size, PageToken: token})
				return render.Msgs(resp.GetPolicies()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&lgroup, "group", "", "only policies from or to this group")
	var (
		from, to, pmode string
		approvers       []string
		papprovals      int32
		esc             escalationFlags
	)
	set := &cobra.Command{
		Use: "set", Short: "Hold messages from one group to another for the approvers it names",
		Long: `Set a message policy: every a2a.send from --from to --to is held until
--approver (and only that user — not even an owner) approves it. The pair
still needs a destination (ncl destinations add), or the send is denied.

Repeat --approver to name several and give --approvals N for a quorum: the
message then needs N of the named approvers (each counted once; one reject
rejects).

--mode rolls a new policy out without breaking agents: audit lets the send
run and logs that it would have been held; warn also tells the agent and the
group's admins; enforce holds. Unset, the policy follows a2a.send's mode
(ncl catalog set).

` + escalationHelp + ` A policy with no plan of its own takes a2a.send's
(ncl catalog set).`,
		Example: "  ncl policies set --from research --to ops --approver telegram:dana\n  ncl policies set --from research --to ops --approver telegram:dana --approver telegram:erin --approvals 2\n  ncl policies set --from research --to ops --approver telegram:dana --mode audit\n  ncl policies set --from research --to ops --approver telegram:dana --remind-after 10m --escalate-after 30m --escalate-to telegram:erin", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := parseMode(pmode)
			if err != nil {
				return err
			}
			a.groupArgs(&from, &to)
			for i := range approvers {
				a.userArgs(&approvers[i])
			}
			remind, escalate := esc.durations()
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: from, ToGroup: to,
					ApproverUserId: approvers[0], AlsoApproverUserIds: approvers[1:], Approvals: papprovals, Mode: mode,
					RemindAfter: remind, EscalateAfter: escalate, EscalateTo: esc.to})
				return resp.GetPolicy(), err
			})
		},
	}
	set.Flags().StringVar(&from, "from", "", "sending group")
	set.Flags().StringVar(&to, "to", "", "receiving group")
	set.Flags().StringArrayVar(&approvers, "approver", nil, "a user who approves (<channel>:<handle>); repeat for several")
	set.Flags().Int32Var(&papprovals, "approvals", 0, "distinct approvals a message needs (quorum; 0 = one)")
	set.Flags().StringVar(&pmode, "mode", "", "enforce, audit, warn or inherit (the default: a2a.send's mode)")
	esc.add(set.Flags())
	required(set, "from", "to", "approver")
	var rfrom, rto string
	remove := &cobra.Command{
		Use: "remove", Short: "Remove a message policy", Example: "  ncl policies remove --from research --to ops", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&rfrom, &rto)
			from, to := rfrom, rto
			return a.done(cmd, fmt.Sprintf("removed policy %s → %s", from, to), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemovePolicy(ctx, &guardv1.RemovePolicyRequest{FromGroup: rfrom, ToGroup: rto})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rfrom, "from", "", "sending group")
	remove.Flags().StringVar(&rto, "to", "", "receiving group")
	required(remove, "from", "to")
	return noun("policies", "Message policies: agent-to-agent sends held for the users they name (a quorum of them)",
		"  ncl policies set --from research --to ops --approver telegram:dana", list, set, remove)
}
