package ncl

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// ncl decisions: the decision log, and why each decision was made.

func (a *app) decisionsCmd() *cobra.Command {
	var req guardv1.ListDecisionsRequest
	var since string
	list := &cobra.Command{
		Use: "list", Short: "List logged decisions, newest first",
		Example: "  ncl decisions list --effect deny\n  ncl decisions list --action a2a.send --group research --since 1h\n  ncl decisions list --actor dana --reads --since 2h --until 1h",
		Long: `List logged decisions, newest first. By default the list shows what changed
something or was refused: holds, denies, mutations and replays. Reads (allowed
list and get calls — every console page view and ncl read is one — and dry runs)
are left out; --reads shows them too.`,
		Args: none,
	}
	effect := enumVar(list, "effect", effectEnum, "only this effect")
	list.Flags().StringVar(&req.Action, "action", "", "only this catalog action")
	list.Flags().StringVar(&req.Group, "group", "", "only decisions about this agent group")
	list.Flags().StringVar(&since, "since", "", "only decisions after this time: a duration ago (90m, 24h) or RFC 3339")
	var until string
	list.Flags().StringVar(&until, "until", "", "only decisions before this time: a duration ago (30m) or RFC 3339")
	list.Flags().StringVar(&req.Actor, "actor", "", "only decisions of this actor: a user (name or id), or agent, host or system")
	list.Flags().BoolVar(&req.IncludeReads, "reads", false, "also reads: allowed list/get calls (page views, ncl reads) and dry runs, left out by default")
	var limit int32
	list.Flags().Int32Var(&limit, "limit", 100, "at most this many, newest first (0 = all: every page is read)")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		req.Effect = guardv1.Effect(effect.val)
		now := time.Now()
		for _, f := range []struct {
			value string
			into  **timestamppb.Timestamp
		}{{since, &req.Since}, {until, &req.Until}} {
			if f.value == "" {
				continue
			}
			t, err := parseSince(f.value, now)
			if err != nil {
				return err
			}
			*f.into = timestamppb.New(t)
		}
		a.groupArgs(&req.Group)
		switch req.Actor {
		case "", "agent", "host", "system":
		default:
			a.userArgs(&req.Actor) // a user's name or id
		}
		return a.listPages(cmd, &guardv1.DecisionRecord{}, limit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			req.Limit, req.PageToken = size, token
			resp, err := c.reg.ListDecisions(ctx, &req)
			return render.Msgs(resp.GetDecisions()), resp.GetNextPageToken(), err
		})
	}
	get := &cobra.Command{
		Use: "get <decision-id>", Short: "Show one logged decision and why it was made",
		Example: "  ncl decisions get dec_019ad9f0a1b2c3d4e5f6a7b8c9d0",
		Args:    one("decision-id"),
	}
	get.RunE = func(cmd *cobra.Command, args []string) error {
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.GetDecision(ctx, &guardv1.GetDecisionRequest{Id: args[0]})
			if err != nil {
				return err
			}
			d := resp.GetDecision()
			x := d.GetExplanation()
			d.Explanation = nil // printed once, after the row
			return a.printer().Explained(d, x)
		})
	}
	return noun("decisions", "The decision log", "  ncl decisions list --effect deny\n  ncl decisions get <id>", list, get)
}

// parseSince accepts "90m"/"24h" (ago) or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usagef("--since %q: a duration ago must be positive", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--since %q: want a duration (90m, 24h) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
}

// decisionViews are how a logged decision prints.
var decisionViews = []render.View{
	render.For[*guardv1.DecisionRecord](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.DecisionRecord).GetId),
			render.C("AT", func(d *guardv1.DecisionRecord) string { return render.Time(d.GetAt()) }),
			render.C("ACTION", (*guardv1.DecisionRecord).GetAction),
			render.CX("ACTOR", func(d *guardv1.DecisionRecord, e render.Env) string { return render.ActorNamed(d.GetActor(), e.Names) }),
			render.Wide(render.C("ACTOR ID", func(d *guardv1.DecisionRecord) string { return render.Actor(d.GetActor()) })),
			render.C("EFFECT", func(d *guardv1.DecisionRecord) string { return enumword.String(d.GetEffect()) }),
			render.C("DECIDED BY", (*guardv1.DecisionRecord).GetDecidedBy),
			render.C("HOLD", (*guardv1.DecisionRecord).GetHoldId),
			render.CX("REASON", func(d *guardv1.DecisionRecord, e render.Env) string {
				r := holdview.Words(e.Names, d.GetReason())
				if d.GetDryRun() {
					r = "(dry run) " + r
				}
				return r
			}),
		},
		Detail: []render.Col{
			render.C("GRANT", (*guardv1.DecisionRecord).GetGrant),
			render.C("MODE", (*guardv1.DecisionRecord).GetMode),
			render.CX("ENFORCE WOULD", func(d *guardv1.DecisionRecord, e render.Env) string {
				if d.GetMode() == "" {
					return ""
				}
				return enumword.String(d.GetWouldEffect()) + ": " + holdview.Words(e.Names, d.GetWouldReason())
			}),
			render.C("LATENCY", func(d *guardv1.DecisionRecord) string { return render.Duration(d.GetLatency()) }),
		},
		ID: render.IDOf((*guardv1.DecisionRecord).GetId),
	}),
}
