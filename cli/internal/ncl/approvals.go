package ncl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/click"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdcard"
	"github.com/clawguard/clawguard/proto/holdview"
)

var holdStatusEnum = guardv1.HoldStatus(0).Descriptor()

// maxReason is the server's limit on a reject reason (it reaches the requester).
const maxReason = 280

func (a *app) approvalsCmd() *cobra.Command {
	return noun("approvals", "Holds waiting for a human: list, approve, reject, watch",
		`  ncl approvals list
  ncl approvals approve <hold-id> --as telegram:dana
  ncl approvals reject <hold-id> --reason "not during the freeze"
  ncl approvals watch`,
		a.approvalsList(), a.approvalsGet(), a.approvalsResolve(true), a.approvalsResolve(false), a.approvalsWatch())
}

func (a *app) approvalsList() *cobra.Command {
	var req guardv1.ListRequest
	var statusWord string
	cmd := &cobra.Command{
		Use: "list", Short: "List holds (pending ones by default), newest first",
		Example: `  ncl approvals list
  ncl approvals list --status all --group research
  ncl approvals list --mine --as telegram:dana   # what dana may resolve (and "you approved")
  ncl approvals list --status resolved --by Dana --since 24h
  ncl approvals list -o wide                     # with the ids behind the names`,
		Args: none,
	}
	statusWords := append(enumword.Words(holdStatusEnum), "resolved", "all")
	var since string
	cmd.Flags().StringVar(&statusWord, "status", "pending", "one of: "+strings.Join(statusWords, ", ")+" (resolved: any but pending)")
	cmd.Flags().StringVar(&req.Resolver, "by", "", "only holds resolved by this user (name or id)")
	cmd.Flags().StringVar(&since, "since", "", "only holds asked for after this time: a duration ago (90m, 24h) or RFC 3339")
	cmd.Flags().StringVar(&req.Kind, "kind", "", "only this hold kind (cli_command, a2a_message_gate, ...)")
	cmd.Flags().StringVar(&req.AgentGroupId, "group", "", "only holds anchored on this agent group (id or name)")
	cmd.Flags().BoolVar(&req.EligibleForMe, "mine", false, "only holds I (or --as) may resolve")
	cmd.Flags().StringVar(&req.AsUser, "as", "", "with --mine and an operator or bridge token: whose eligibility")
	var limit int32
	limitFlag(cmd, &limit)
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statusWords, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch statusWord {
		case "all":
		case "resolved":
			req.Resolved = true
		default:
			n, err := render.ParseEnum(holdStatusEnum, statusWord)
			if err != nil {
				// The same words as the help: the enum's, and "all".
				return usagef("--status: invalid value %q (want one of: %s)", statusWord, strings.Join(statusWords, ", "))
			}
			req.Status = guardv1.HoldStatus(n)
		}
		if req.AsUser != "" && !req.EligibleForMe {
			return usagef("--as on list only means something with --mine")
		}
		if since != "" {
			t, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			req.Since = timestamppb.New(t)
		}
		a.groupArgs(&req.AgentGroupId)
		a.userArgs(&req.AsUser, &req.Resolver)
		a.viewer = &req.AsUser
		return a.listPages(cmd, &guardv1.Hold{}, limit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			req.Limit, req.PageToken = size, token
			resp, err := c.appr.List(ctx, &req)
			return render.Msgs(resp.GetHolds()), resp.GetNextPageToken(), err
		})
	}
	return cmd
}

func (a *app) approvalsGet() *cobra.Command {
	var history bool
	cmd := &cobra.Command{
		Use: "get <hold-id>", Short: "Show one hold in full (question, payload, approver)",
		Example: "  ncl approvals get hold_3266c0872182ee7add9f\n  ncl approvals get hold_3266c0872182ee7add9f --history", Args: one("hold-id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !history {
				return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
					resp, err := c.appr.Get(ctx, &guardv1.GetRequest{Id: args[0]})
					return resp.GetHold(), err
				})
			}
			return a.do(cmd, func(ctx context.Context, c *clients) error {
				resp, err := c.appr.Get(ctx, &guardv1.GetRequest{Id: args[0], History: true})
				if err != nil {
					return err
				}
				return a.printHistory(resp)
			})
		},
	}
	cmd.Flags().BoolVar(&history, "history", false, "also its lifecycle events and the decisions that made and used it (the console's hold page)")
	return cmd
}

// printHistory prints a hold with its history: the hold's block, its
// events and the decisions that named it (ncl decisions get shows each);
// -o json the whole answer.
func (a *app) printHistory(resp *guardv1.GetResponse) error {
	p := a.printer()
	if p.JSON || p.Quiet {
		return p.Object(resp.GetHold())
	}
	if err := p.Object(resp.GetHold()); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	if err := p.List(&guardv1.HoldEvent{}, render.Msgs(resp.GetEvents())); err != nil {
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "\nDECISIONS: %s\n", render.Cell(strings.Join(resp.GetDecisionIds(), " ")))
	return err
}

func (a *app) approvalsResolve(approve bool) *cobra.Command {
	var (
		req         guardv1.ResolveRequest
		standingFor time.Duration
	)
	cmd := &cobra.Command{Args: one("hold-id")}
	verb := "approved"
	if approve {
		cmd.Use, cmd.Short = "approve <hold-id>", "Approve a hold (the action is then replayed with the grant)"
		cmd.Example = "  ncl approvals approve hold_3266c0872182ee7add9f                    # with a user token: as that user\n  ncl approvals approve hold_3266c0872182ee7add9f --as telegram:dana  # operator or bridge token: names the clicker\n  ncl approvals approve hold_3266c0872182ee7add9f --for 1h            # and the same request again, for an hour\n  ncl approvals approve hold_3266c0872182ee7add9f --for-session       # and again from the same session"
		cmd.Flags().StringVar(&req.Choice, "choice", "", "option value, for cards with several options")
		cmd.Flags().DurationVar(&standingFor, "for", 0, "approve as a standing grant for this long (at most the server's --standing-grant-max): the identical request (same action, target and payload) is then allowed without asking; ncl grants revoke ends it")
		cmd.Flags().BoolVar(&req.StandingSession, "for-session", false, "approve as a standing grant for the requesting session (at most the server's --standing-grant-max)")
		req.Outcome = guardv1.Outcome_OUTCOME_APPROVE
	} else {
		verb = "rejected"
		cmd.Use, cmd.Short = "reject <hold-id>", "Reject a hold, optionally telling the requester why"
		cmd.Example = `  ncl approvals reject hold_3266c0872182ee7add9f --reason "not during the freeze"`
		cmd.Flags().StringVar(&req.Reason, "reason", "", fmt.Sprintf("why (at most %d characters; reaches the requester)", maxReason))
		req.Outcome = guardv1.Outcome_OUTCOME_REJECT
	}
	cmd.Flags().StringVar(&req.AsUser, "as", "", "the user resolving, for operator and bridge tokens (a user token always resolves as itself)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if n := len([]rune(req.Reason)); n > maxReason {
			return usagef("--reason is %d characters; at most %d reach the requester", n, maxReason)
		}
		req.Id = args[0]
		if standingFor < 0 {
			return usagef("--for must not be negative")
		}
		if standingFor > 0 {
			req.StandingFor = durationpb.New(standingFor)
		}
		a.userArgs(&req.AsUser)
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			// What the hold was before the click: a second approval by
			// the same approver is told apart from a first one.
			var before *guardv1.Hold
			if approve {
				if g, err := c.appr.Get(ctx, &guardv1.GetRequest{Id: req.Id}); err == nil {
					before = g.GetHold()
				}
			}
			// A click the server cannot take now (its database restarting,
			// out of disk) is asked again, after the server's hint, until
			// --timeout: the same request, which counts once.
			res, err := click.Resolve(ctx, click.Calls{
				Resolve: func(ctx context.Context, r *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
					return c.appr.Resolve(ctx, r)
				},
				Get: func(ctx context.Context, id string) (*guardv1.Hold, error) {
					g, err := c.appr.Get(ctx, &guardv1.GetRequest{Id: id})
					return g.GetHold(), err
				},
			}, &req, click.Options{For: a.timeout, Clicker: req.AsUser, OnRetry: func(err error, wait time.Duration) {
				fmt.Fprintf(a.stderr, "ncl: %s; trying again in %s\n", status.Convert(err).Message(), wait.Round(time.Millisecond))
			}})
			if err != nil {
				if approve && alreadyApprovedBy(before, req.AsUser) && status.Code(err) == codes.FailedPrecondition {
					// The clicker's own approval resolved it before: their
					// click stands, nothing more was done.
					p := a.printer()
					if p.JSON || p.Quiet {
						return p.Object(before)
					}
					return p.Done(fmt.Sprintf("already approved; %s: hold %s (%s) is %s", holdview.Progress(before, ""), before.GetId(),
						before.GetKind(), enumword.String(before.GetStatus())))
				}
				return err
			}
			h := res.Hold
			p := a.printer()
			if p.JSON || p.Quiet {
				return p.Object(h)
			}
			return p.Done(resolvedWords(verb, approve, req.AsUser, before, h, res.StandingGrant))
		})
	}
	return cmd
}

// resolvedWords says what a click did: the hold resolved, one approval of
// a quorum recorded (or already on record), and the standing grant it made.
func resolvedWords(verb string, approve bool, asUser string, before, h *guardv1.Hold, g *guardv1.StandingGrant) string {
	by := h.GetResolver()
	if by == "" {
		by = asUser
	}
	line := fmt.Sprintf("%s hold %s (%s)", verb, h.GetId(), h.GetKind())
	if by != "" {
		line += " as " + by
	}
	if approve && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING && h.GetApprovalsRequired() > 1 {
		// One approval of a quorum: the hold waits for the others.
		line = fmt.Sprintf("approval recorded on hold %s (%s); still pending: approvals %s", h.GetId(), h.GetKind(), render.Quorum(h))
		if repeatedApproval(before, h, asUser) {
			// The server records an approver once and says OK again.
			line = fmt.Sprintf("already approved; %s: hold %s (%s) is still pending (approvals %s)",
				holdview.Progress(h, ""), h.GetId(), h.GetKind(), render.Quorum(h))
		}
	}
	if g != nil {
		line += fmt.Sprintf("; standing grant %s until %s", g.GetId(), render.Time(g.GetExpiresAt()))
		if g.GetSessionId() != "" {
			line += " for session " + g.GetSessionId()
		}
	}
	return line
}

// alreadyApprovedBy: before the click, hold h was no longer pending and
// clicker had approved it (as its quorum's approver or its resolver).
// Only a known clicker (--as) is recognised: a user token's user is the
// server's to know.
func alreadyApprovedBy(h *guardv1.Hold, clicker string) bool {
	if h == nil || clicker == "" || h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		return false
	}
	return h.GetResolver() == clicker || holdview.Approved(h, clicker)
}

// repeatedApproval: the click added no approval to a quorum hold. With a
// known clicker, theirs was on record before; without one, no approver
// appeared that was not there before.
func repeatedApproval(before, after *guardv1.Hold, clicker string) bool {
	if before == nil {
		return false
	}
	if clicker != "" {
		return holdview.Approved(before, clicker)
	}
	for _, a := range after.GetApprovals() {
		if !holdview.Approved(before, a.GetUserId()) {
			return false
		}
	}
	return true
}

// holdViews are how a hold prints: one line of what it asks in a list, every
// field of it in a block.
var holdViews = []render.View{
	render.For[*guardv1.HoldEvent](render.View{
		Cols: []render.Col{
			render.C("AT", func(e *guardv1.HoldEvent) string { return render.Time(e.GetAt()) }),
			render.C("EVENT", func(e *guardv1.HoldEvent) string { return enumword.String(e.GetType()) }),
			render.C("OUTCOME", func(e *guardv1.HoldEvent) string { return enumword.String(e.GetOutcome()) }),
			render.CX("BY", func(e *guardv1.HoldEvent, env render.Env) string { return env.User(e.GetResolver()) }),
		},
		ID: render.IDOf(func(e *guardv1.HoldEvent) string { return enumword.String(e.GetType()) }),
	}),
	render.For[*guardv1.Hold](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.Hold).GetId),
			render.C("STATUS", func(h *guardv1.Hold) string { return enumword.String(h.GetStatus()) }),
			render.C("KIND", (*guardv1.Hold).GetKind),
			render.CX("GROUP", func(h *guardv1.Hold, e render.Env) string { return e.Group(h.GetAgentGroupId()) }),
			render.CX("ASKS", func(h *guardv1.Hold, e render.Env) string { return holdcard.Of(h).Asks(e.Names) }),
			render.CX("REQUESTER", func(h *guardv1.Hold, e render.Env) string { return holdcard.Of(h).Requester(e.Names) }),
			render.CX("AGE", func(h *guardv1.Hold, e render.Env) string { return render.Ago(h.GetCreatedAt(), e.Now) }),
			render.CX("APPROVALS", func(h *guardv1.Hold, e render.Env) string { return holdview.Progress(h, e.Viewer) }),
			render.Wide(render.C("ACTION", (*guardv1.Hold).GetCatalogAction)),
			render.Wide(render.C("GROUP ID", (*guardv1.Hold).GetAgentGroupId)),
			render.Wide(render.CX("APPROVER", func(h *guardv1.Hold, e render.Env) string { return render.RuleNamed(h.GetApproverRule(), e.Names) })),
			render.Wide(render.C("SCOPE", func(h *guardv1.Hold) string { return enumword.String(h.GetApproverScope()) })),
			render.Wide(render.C("CREATED", func(h *guardv1.Hold) string { return render.Time(h.GetCreatedAt()) })),
			render.Wide(render.C("TITLE", func(h *guardv1.Hold) string { return render.Truncate(h.GetTitle(), 60) })),
		},
		Detail: []render.Col{
			render.C("QUESTION", (*guardv1.Hold).GetQuestion),
			render.CX("APPROVED BY", func(h *guardv1.Hold, e render.Env) string {
				if len(h.GetApprovals()) == 0 && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED {
					// A hold of one approval: its resolver approved it.
					return render.Named(e.UserName(h.GetResolver()), h.GetResolver())
				}
				var out []string
				for _, a := range h.GetApprovals() {
					who := render.Named(e.UserName(a.GetUserId()), a.GetUserId())
					if a.GetIneligible() {
						who += " [no longer eligible: not counted]"
					}
					out = append(out, who)
				}
				return strings.Join(out, ", ")
			}),
			render.C("OPTIONS", func(h *guardv1.Hold) string {
				var parts []string
				for _, o := range h.GetOptions() {
					parts = append(parts, o.GetLabel()+"="+o.GetValue())
				}
				return strings.Join(parts, " ")
			}),
			render.C("REQUESTER ID", func(h *guardv1.Hold) string { return render.Actor(h.GetRequester()) }),
			render.C("SESSION", (*guardv1.Hold).GetSessionId),
			render.CX("DELIVERED TO", func(h *guardv1.Hold, e render.Env) string {
				return render.Named(e.UserName(h.GetDeliveredTo()), h.GetDeliveredTo())
			}),
			render.C("AWAITING", func(h *guardv1.Hold) string {
				if u := h.GetAwaitingReasonFrom(); u != "" {
					return "reject reason from " + u
				}
				return ""
			}),
			render.C("EXPIRES", func(h *guardv1.Hold) string { return render.Time(h.GetExpiresAt()) }),
			render.C("REMINDED", func(h *guardv1.Hold) string {
				if h.GetRemindedAt() != nil {
					return render.Time(h.GetRemindedAt())
				}
				if h.GetRemindAt() != nil && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
					return "due " + render.Time(h.GetRemindAt())
				}
				return ""
			}),
			render.CX("ESCALATED", func(h *guardv1.Hold, e render.Env) string {
				if h.GetEscalatedAt() != nil {
					return render.Time(h.GetEscalatedAt()) + " to " + e.Approvers(h.GetEscalatedTo())
				}
				if h.GetEscalateAt() != nil && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
					return "due " + render.Time(h.GetEscalateAt()) + " to " + e.Approvers(h.GetEscalateTo())
				}
				return ""
			}),
			render.C("RESOLVED", func(h *guardv1.Hold) string { return render.Time(h.GetResolvedAt()) }),
			render.CX("RESOLVER", func(h *guardv1.Hold, e render.Env) string {
				return render.Named(e.UserName(h.GetResolver()), h.GetResolver())
			}),
			render.C("CHOICE", (*guardv1.Hold).GetChoice),
			render.C("REASON", (*guardv1.Hold).GetReason),
			render.C("CONSUMED", func(h *guardv1.Hold) string { return render.YesNo(h.GetConsumed()) }),
			render.CX("NOT CARRIED OUT", func(h *guardv1.Hold, e render.Env) string { return holdview.Words(e.Names, h.GetUnappliedReason()) }),
			render.C("PAYLOAD", func(h *guardv1.Hold) string { return render.StructJSON(h.GetPayload()) }),
		},
		ID: render.IDOf((*guardv1.Hold).GetId),
	}),
}
