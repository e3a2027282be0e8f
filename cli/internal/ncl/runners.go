package ncl

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl runners: the runners, one per host, their leases and sessions.

func (a *app) runnersCmd() *cobra.Command {
	var runnersLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List runners, their leases and sessions", Example: "  ncl runners list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listPages(cmd, &guardv1.Runner{}, runnersLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListRunners(ctx, &guardv1.ListRunnersRequest{Limit: size, PageToken: token})
				return render.Msgs(resp.GetRunners()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &runnersLimit)
	return noun("runners", "Runners (one per host)", "  ncl runners list", list)
}

// runnerViews are how a runner prints.
var runnerViews = []render.View{
	render.For[*guardv1.Runner](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.Runner).GetId),
			render.C("HOST", (*guardv1.Runner).GetHost),
			render.C("VERSION", (*guardv1.Runner).GetVersion),
			render.C("LIVE", func(r *guardv1.Runner) string { return render.YesNo(r.GetLive()) }),
			render.C("SESSIONS", func(r *guardv1.Runner) string { return render.Num(int64(r.GetSessions())) }),
			render.C("LEASE EXPIRES", func(r *guardv1.Runner) string { return render.Time(r.GetLeaseExpiresAt()) }),
			render.C("CAPABILITIES", func(r *guardv1.Runner) string { return strings.Join(r.GetCapabilities(), ",") }),
		},
		Detail: []render.Col{
			render.C("REGISTERED", func(r *guardv1.Runner) string { return render.Time(r.GetRegisteredAt()) }),
			render.C("LABELS", func(r *guardv1.Runner) string { return render.KV(r.GetLabels()) }),
			render.C("DELIVERY ACTIONS", func(r *guardv1.Runner) string {
				var parts []string
				for _, d := range r.GetDeliveryActions() {
					parts = append(parts, d.GetName()+"→"+render.Cell(d.GetCatalogAction()))
				}
				return strings.Join(parts, " ")
			}),
		},
		ID: render.IDOf((*guardv1.Runner).GetId),
	}),
}
