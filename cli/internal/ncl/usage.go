package ncl

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

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
