package ncl

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// grantsCmd: the standing grants approvers gave (ncl approvals approve --for
// / --for-session), listed and revoked.
func (a *app) grantsCmd() *cobra.Command {
	var (
		group string
		all   bool
	)
	list := &cobra.Command{
		Use:     "list [--group G] [--all]",
		Short:   "List the live standing grants you may revoke (--all: expired and revoked ones too)",
		Example: "  ncl grants list\n  ncl grants list --group research --all -o json",
		Args:    none,
	}
	list.Flags().StringVar(&group, "group", "", "only this group's (name or id)")
	list.Flags().BoolVar(&all, "all", false, "also the expired and revoked ones")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		a.groupArgs(&group)
		return a.list(cmd, &guardv1.StandingGrant{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
			resp, err := c.appr.ListStandingGrants(ctx, &guardv1.ListStandingGrantsRequest{AgentGroupId: group, IncludeEnded: all})
			return render.Msgs(resp.GetGrants()), err
		})
	}
	revoke := &cobra.Command{
		Use:     "revoke <grant-id>",
		Short:   "Revoke a standing grant: the next identical request is held again, on every replica",
		Example: "  ncl grants revoke sg_3f9a0c1d2e4b5a69",
		Args:    one("grant-id"),
	}
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.appr.RevokeStandingGrant(ctx, &guardv1.RevokeStandingGrantRequest{Id: args[0]})
			return resp.GetGrant(), err
		})
	}
	return noun("grants", "Standing grants: approvals for a time or a session (ncl approvals approve --for)",
		"  ncl grants list\n  ncl grants revoke sg_3f9a0c1d2e4b5a69", list, revoke)
}

// grantViews are how a standing grant prints.
var grantViews = []render.View{
	render.For[*guardv1.StandingGrant](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.StandingGrant).GetId),
			render.C("ACTION", (*guardv1.StandingGrant).GetCatalogAction),
			render.CX("GROUP", func(g *guardv1.StandingGrant, e render.Env) string { return e.Group(g.GetAgentGroupId()) }),
			render.CX("RESOURCE", func(g *guardv1.StandingGrant, e render.Env) string {
				return holdview.Words(e.Names, render.KV(g.GetResource()))
			}),
			render.CX("APPROVED BY", func(g *guardv1.StandingGrant, e render.Env) string {
				var names []string
				for _, u := range g.GetApprovedBy() {
					names = append(names, e.User(u))
				}
				return strings.Join(names, ", ")
			}),
			render.C("UNTIL", func(g *guardv1.StandingGrant) string { return render.Time(g.GetExpiresAt()) }),
			render.C("SESSION", func(g *guardv1.StandingGrant) string { return render.Cell(g.GetSessionId()) }),
			render.C("USES", func(g *guardv1.StandingGrant) string { return render.Num(g.GetUses()) }),
			render.C("REVOKED", func(g *guardv1.StandingGrant) string { return render.Time(g.GetRevokedAt()) }),
		},
		Detail: []render.Col{
			render.C("HOLD", (*guardv1.StandingGrant).GetHoldId),
			render.C("KIND", (*guardv1.StandingGrant).GetKind),
			render.C("CREATED", func(g *guardv1.StandingGrant) string { return render.Time(g.GetCreatedAt()) }),
			render.CX("REVOKED BY", func(g *guardv1.StandingGrant, e render.Env) string { return e.User(g.GetRevokedBy()) }),
			render.C("LAST USED", func(g *guardv1.StandingGrant) string { return render.Time(g.GetLastUsedAt()) }),
		},
		ID: render.IDOf((*guardv1.StandingGrant).GetId),
	}),
}
