package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// freezeTarget reads --all / --group / --runner: exactly one.
type freezeTarget struct {
	all           bool
	group, runner string
}

func (f *freezeTarget) flags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.all, "all", false, "every agent of the fleet")
	cmd.Flags().StringVar(&f.group, "group", "", "one group's agents (name or id)")
	cmd.Flags().StringVar(&f.runner, "runner", "", "the agents one runner hosts (runner id)")
	cmd.MarkFlagsMutuallyExclusive("all", "group", "runner")
	cmd.MarkFlagsOneRequired("all", "group", "runner")
}

func (f *freezeTarget) scope() guardv1.FreezeScope {
	switch {
	case f.all:
		return guardv1.FreezeScope_FREEZE_SCOPE_ALL
	case f.group != "":
		return guardv1.FreezeScope_FREEZE_SCOPE_GROUP
	}
	return guardv1.FreezeScope_FREEZE_SCOPE_RUNNER
}

func (a *app) freezeCmd() *cobra.Command {
	var (
		target freezeTarget
		reason string
	)
	cmd := &cobra.Command{
		Use:   "freeze (--all | --group G | --runner R) [--reason TEXT]",
		Short: "Stop every privileged action of the agents in a scope, at once, on every replica",
		Long: `Freeze a scope: from the moment this returns, every decision an agent in it
asks (every agent, one group's, or one runner's) is denied, on every server
replica, whatever its mode or grant — always enforced. Pending holds of frozen
agents stay pending (approving one is refused until the freeze is lifted).
People are not frozen: "ncl unfreeze" restores exactly what was.

The operator, owners and global admins freeze any scope; a group's admins their
group. An agent's freeze is held for approval like its other admin commands.`,
		Example: "  ncl freeze --group research --reason \"incident 42\"\n  ncl freeze --all --reason \"stop everything\"\n  ncl freeze --runner host-3",
		Args:    none,
	}
	target.flags(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown on every denied decision's record and in ncl freezes list)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		a.groupArgs(&target.group)
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.Freeze(ctx, &guardv1.FreezeRequest{Scope: target.scope(), Group: target.group, Runner: target.runner, Reason: reason})
			return resp.GetFreeze(), err
		})
	}
	return cmd
}

func (a *app) unfreezeCmd() *cobra.Command {
	var target freezeTarget
	cmd := &cobra.Command{
		Use:     "unfreeze (--all | --group G | --runner R)",
		Short:   "Lift a freeze: the scope's agents are decided as before it",
		Example: "  ncl unfreeze --group research\n  ncl unfreeze --all",
		Args:    none,
	}
	target.flags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		a.groupArgs(&target.group)
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: target.scope(), Group: target.group, Runner: target.runner})
			if err != nil {
				return err
			}
			f := resp.GetFreeze()
			_, err = fmt.Fprintf(a.stdout, "unfrozen (frozen by %s since %s)\n", f.GetFrozenBy(), render.Time(f.GetFrozenAt()))
			return err
		})
	}
	return cmd
}

func (a *app) freezesCmd() *cobra.Command {
	list := &cobra.Command{Use: "list", Short: "List the frozen scopes", Example: "  ncl freezes list\n  ncl freezes list -o json", Args: none}
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.list(cmd, &guardv1.Freeze{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
			resp, err := c.reg.ListFreezes(ctx, &guardv1.ListFreezesRequest{})
			return render.Msgs(resp.GetFreezes()), err
		})
	}
	return noun("freezes", "Frozen scopes (ncl freeze, ncl unfreeze)", "  ncl freezes list", list)
}

// freezeViews are how a freeze prints.
var freezeViews = []render.View{
	render.For[*guardv1.Freeze](render.View{
		Cols: []render.Col{
			render.C("SCOPE", func(f *guardv1.Freeze) string { return enumword.String(f.GetScope()) }),
			render.CX("TARGET", func(f *guardv1.Freeze, e render.Env) string {
				if f.GetGroup() != "" {
					return e.GroupName(f.GetGroup())
				}
				return f.GetRunner()
			}),
			render.C("FROZEN BY", (*guardv1.Freeze).GetFrozenBy),
			render.C("SINCE", func(f *guardv1.Freeze) string { return render.Time(f.GetFrozenAt()) }),
			render.C("REASON", (*guardv1.Freeze).GetReason),
		},
		ID: render.IDOf(func(f *guardv1.Freeze) string {
			return enumword.String(f.GetScope()) + ":" + f.GetGroup() + f.GetRunner()
		}),
	}),
}
