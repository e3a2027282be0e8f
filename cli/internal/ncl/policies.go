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
	set := a.policiesSet()
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

// policiesSet sets a message policy.
func (a *app) policiesSet() *cobra.Command {
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
	return set
}

// policyViews are how a message policy prints.
var policyViews = []render.View{
	render.For[*guardv1.MessagePolicy](render.View{
		Cols: []render.Col{
			render.CX("FROM", func(p *guardv1.MessagePolicy, e render.Env) string { return e.Group(p.GetFromGroup()) }),
			render.CX("TO", func(p *guardv1.MessagePolicy, e render.Env) string { return e.Group(p.GetToGroup()) }),
			render.Wide(render.C("FROM ID", (*guardv1.MessagePolicy).GetFromGroup)),
			render.Wide(render.C("TO ID", (*guardv1.MessagePolicy).GetToGroup)),
			render.CX("APPROVERS", func(p *guardv1.MessagePolicy, e render.Env) string {
				var out []string
				for _, u := range append([]string{p.GetApproverUserId()}, p.GetAlsoApproverUserIds()...) {
					out = append(out, e.User(u))
				}
				return strings.Join(out, ", ")
			}),
			render.Wide(render.C("APPROVER IDS", func(p *guardv1.MessagePolicy) string {
				return strings.Join(append([]string{p.GetApproverUserId()}, p.GetAlsoApproverUserIds()...), ", ")
			})),
			render.C("APPROVALS", func(p *guardv1.MessagePolicy) string { return fmt.Sprint(max(p.GetApprovals(), 1)) }),
			render.C("MODE", func(p *guardv1.MessagePolicy) string { return render.ModeWord(p.GetMode(), "inherit") }),
			render.CX("ESCALATION", func(p *guardv1.MessagePolicy, e render.Env) string {
				return e.Escalation(p.GetRemindAfter(), p.GetEscalateAfter(), p.GetEscalateTo())
			}),
		},
		ID: render.IDOf(func(p *guardv1.MessagePolicy) string { return p.GetFromGroup() + " " + p.GetToGroup() }),
	}),
}

// Message policies in the document: who approves a group's messages to
// another (approvers by user id), their quorum, mode and escalation.

var policiesState = &statePart{read: readPolicies, plan: planPolicies, check: checkPolicies, sort: sortPolicies}

type policySpec struct {
	From      string   `yaml:"from"`
	To        string   `yaml:"to"`
	Approvers []string `yaml:"approvers"`
	Approvals int32    `yaml:"approvals,omitempty"`
	Mode      string   `yaml:"mode,omitempty"`
	// Escalation (user ids, group:<name>).
	EscalationSpec `yaml:",inline"`
}

func (p policySpec) key() string { return p.From + " → " + p.To }

// readPolicies reads every message policy.
func readPolicies(ctx context.Context, c *clients, s *state, book groupBook) error {
	policies, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListPolicies(ctx, &guardv1.ListPoliciesRequest{Limit: size, PageToken: token})
		return msgs(r.GetPolicies()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read policies: %w", err)
	}
	for _, m := range policies {
		p := m.(*guardv1.MessagePolicy)
		// "" inherits a2a.send's mode; "enforce" says so whatever that is.
		mode := enumword.String(p.GetMode())
		s.Policies = append(s.Policies, policySpec{From: book.nameOf(p.GetFromGroup()), To: book.nameOf(p.GetToGroup()),
			Approvers: append([]string{p.GetApproverUserId()}, p.GetAlsoApproverUserIds()...), Approvals: p.GetApprovals(), Mode: mode,
			EscalationSpec: escalationOf(p.GetRemindAfter(), p.GetEscalateAfter(), p.GetEscalateTo(), book)})
	}
	return nil
}

func planPolicies(cur, want *state) (out planned) {
	// Message policies: set is create-or-replace.
	policies := map[string]policySpec{}
	for _, p := range cur.Policies {
		policies[p.key()] = p
	}
	for _, p := range want.Policies {
		old, ok := policies[p.key()]
		if ok && slices.Equal(old.Approvers, p.Approvers) && old.Approvals == p.Approvals && old.Mode == p.Mode && old.EscalationSpec.equal(p.EscalationSpec) {
			continue
		}
		op, what := byte('+'), fmt.Sprintf("policy %s: approvers %s%s", p.key(), strings.Join(p.Approvers, ", "), quorumWords(p, false))
		if ok {
			op = '~'
			modes := old.Mode != p.Mode // "" (inherit) and "enforce" differ: say so
			what = fmt.Sprintf("policy %s: approvers %s%s → %s%s", p.key(), strings.Join(old.Approvers, ", "), quorumWords(old, modes), strings.Join(p.Approvers, ", "), quorumWords(p, modes))
		}
		out.changes = append(out.changes, change{op, what, func(ctx context.Context, c *clients, book groupBook) error {
			if len(p.Approvers) == 0 {
				return fmt.Errorf("policy %s: at least one approver", p.key())
			}
			mode, err := parseMode(p.Mode)
			if err != nil {
				return fmt.Errorf("policy %s: %w", p.key(), err)
			}
			remind, escalate, to, err := p.EscalationSpec.request()
			if err != nil {
				return fmt.Errorf("policy %s: %w", p.key(), err)
			}
			_, err = c.reg.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: idOr(book, p.From), ToGroup: idOr(book, p.To),
				ApproverUserId: p.Approvers[0], AlsoApproverUserIds: p.Approvers[1:], Approvals: p.Approvals, Mode: mode,
				RemindAfter: remind, EscalateAfter: escalate, EscalateTo: to})
			return err
		}})
	}
	for _, p := range cur.Policies {
		if _, ok := policyIn(want.Policies, p.key()); !ok {
			out.dels = append(out.dels, change{'-', "policy " + p.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.RemovePolicy(ctx, &guardv1.RemovePolicyRequest{FromGroup: idOr(book, p.From), ToGroup: idOr(book, p.To)})
				return err
			}})
		}
	}

	return out
}

func checkPolicies(s *state, once func(kind, key string) error) (err error) {
	for _, p := range s.Policies {
		err = firstErr(err, once("policy", p.From+"/"+p.To))
	}
	return err
}

func sortPolicies(s *state) {
	slices.SortFunc(s.Policies, func(a, b policySpec) int { return strings.Compare(a.key(), b.key()) })
}

// quorumWords says a policy's quorum, mode (always with showMode: "inherit"
// for none) and escalation.
func quorumWords(p policySpec, showMode bool) string {
	w := ""
	if p.Approvals > 1 {
		w += fmt.Sprintf(", %d of them", p.Approvals)
	}
	switch {
	case p.Mode != "":
		w += ", mode " + p.Mode
	case showMode:
		w += ", mode inherit"
	}
	return w + p.EscalationSpec.words()
}

func policyIn(list []policySpec, key string) (policySpec, bool) {
	for _, p := range list {
		if p.key() == key {
			return p, true
		}
	}
	return policySpec{}, false
}
