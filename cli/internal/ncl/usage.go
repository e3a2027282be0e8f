package ncl

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl usage: what groups' agents used of their models, per UTC day,
// provider and model, as the providers reported it (the model gateway
// meters every call).
func (a *app) usageCmd() *cobra.Command {
	var group, since string
	var limit int32
	cmd := &cobra.Command{
		Use: "usage", Short: "What groups used of their models, per day, provider and model",
		Long: `List model usage per group, UTC day, provider and model, newest day first:
calls, input, output and cache tokens as the providers reported them, and the
cost at the operator's prices. A call cut before its provider's usage came
whole counts its output at the bound it reserved. Without --since: the last
30 days; without --group: every group the caller may read.`,
		Example: "  ncl usage\n  ncl usage --group research --since 2026-03-01\n  ncl usage -o json",
		Args:    none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group != "" {
				a.groupArgs(&group)
			}
			return a.listPages(cmd, &guardv1.ModelUsage{}, limit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				r, err := c.reg.ListModelUsage(ctx, &guardv1.ListModelUsageRequest{Group: group, Since: since, Limit: size, PageToken: token})
				return msgs(r.GetUsage()), r.GetNextPageToken(), err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id); empty: every group you may read")
	cmd.Flags().StringVar(&since, "since", "", "first day, YYYY-MM-DD (UTC); empty: the last 30 days")
	limitFlag(cmd, &limit)
	return cmd
}

// usageViews are how a day of a group's model usage prints.
var usageViews = []render.View{
	render.For[*guardv1.ModelUsage](render.View{
		Cols: []render.Col{
			render.C("DAY", (*guardv1.ModelUsage).GetDay),
			render.CX("GROUP", func(u *guardv1.ModelUsage, e render.Env) string { return e.Group(u.GetGroup()) }),
			render.C("PROVIDER", (*guardv1.ModelUsage).GetProvider),
			render.C("MODEL", (*guardv1.ModelUsage).GetModel),
			render.C("CALLS", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetCalls(), 10) }),
			render.C("INPUT", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetInputTokens(), 10) }),
			render.C("OUTPUT", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetOutputTokens(), 10) }),
			render.C("CACHE READ", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetCacheReadTokens(), 10) }),
			render.C("CACHE WRITE", func(u *guardv1.ModelUsage) string { return strconv.FormatInt(u.GetCacheWriteTokens(), 10) }),
			render.C("COST", func(u *guardv1.ModelUsage) string { return render.Micros(u.GetCostMicros()) }),
			render.Wide(render.C("GROUP ID", (*guardv1.ModelUsage).GetGroup)),
		},
		ID: render.IDOf(func(u *guardv1.ModelUsage) string {
			return u.GetDay() + "/" + u.GetGroup() + "/" + u.GetProvider() + "/" + u.GetModel()
		}),
	}),
}
