package ncl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// completionShells are the shells `ncl completion` writes scripts for.
var completionShells = []string{"bash", "zsh", "fish"}

func completionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print a completion script for bash, zsh or fish. Besides commands, flags and
enum words, it completes the ids of pending holds (approvals get/approve/reject), agent
groups by name (with the id shown, for <group> arguments and --group, --from,
--to and --target-group) and users (--as, --user, --approver, --by), asking
the server the current settings point at.

  bash: source <(ncl completion bash)      # or save it under /etc/bash_completion.d/ncl
  zsh:  ncl completion zsh > ~/.zfunc/_ncl   # with fpath+=(~/.zfunc) in ~/.zshrc
  fish: ncl completion fish > ~/.config/fish/completions/ncl.fish`,
		Example:   "  source <(ncl completion bash)\n  ncl completion fish > ~/.config/fish/completions/ncl.fish",
		ValidArgs: completionShells,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || !contains(completionShells, args[0]) {
				return usagef("completion takes one argument: bash, zsh or fish")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "bash":
				return cmd.Root().GenBashCompletionV2(cmd.OutOrStdout(), true)
			case "zsh":
				return cmd.Root().GenZshCompletion(cmd.OutOrStdout())
			}
			return cmd.Root().GenFishCompletion(cmd.OutOrStdout(), true)
		},
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// groupFlags are the flags that name an agent group; userFlags a user.
var (
	groupFlags = []string{"group", "from", "to", "target-group"}
	userFlags  = []string{"as", "user", "approver", "by"}
)

// addDynamicCompletion completes hold ids and group ids from the server:
// <hold-id> arguments, the <id>/<group> argument of group commands, and
// every flag naming a group.
func (a *app) addDynamicCompletion(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		fields := strings.Fields(c.Use)
		if len(fields) > 1 && c.ValidArgsFunction == nil {
			switch arg := fields[1]; {
			case arg == "<hold-id>":
				c.ValidArgsFunction = a.firstArg(a.completeHolds)
			case arg == "<group>" || (c.Parent() != nil && c.Parent().Name() == "groups" && (arg == "<id>" || arg == "<id|name>")):
				c.ValidArgsFunction = a.firstArg(a.completeGroups)
			}
		}
		for _, f := range groupFlags {
			if c.Flags().Lookup(f) != nil {
				_ = c.RegisterFlagCompletionFunc(f, func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
					return a.completeGroups(cmd)
				})
			}
		}
		for _, f := range userFlags {
			if c.Flags().Lookup(f) != nil {
				_ = c.RegisterFlagCompletionFunc(f, func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
					return a.completeUsers(cmd)
				})
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

func (a *app) firstArg(f func(*cobra.Command) ([]string, cobra.ShellCompDirective)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd)
	}
}

// completeCall asks the server with a short deadline; any failure (no
// token, server down) completes nothing rather than printing an error.
func (a *app) completeCall(cmd *cobra.Command, f func(ctx context.Context, c *clients) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	c, err := a.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	out, err := f(ctx, c)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeHolds: pending holds the caller can see, "id<TAB>kind: title".
func (a *app) completeHolds(cmd *cobra.Command) ([]string, cobra.ShellCompDirective) {
	return a.completeCall(cmd, func(ctx context.Context, c *clients) ([]string, error) {
		resp, err := c.appr.List(ctx, &guardv1.ListRequest{Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, Limit: 100})
		var out []string
		for _, h := range resp.GetHolds() {
			out = append(out, fmt.Sprintf("%s\t%s: %s", h.GetId(), h.GetKind(), h.GetTitle()))
		}
		return out, err
	})
}

// completeGroups: agent groups by name, "name<TAB>id" (every command takes
// a group by name or id; the name is what a person types).
func (a *app) completeGroups(cmd *cobra.Command) ([]string, cobra.ShellCompDirective) {
	return a.completeCall(cmd, func(ctx context.Context, c *clients) ([]string, error) {
		all, err := pages(ctx, c, 0, listGroupsPage)
		var out []string
		for _, m := range all {
			g := m.(*guardv1.Group)
			out = append(out, g.GetName()+"\t"+g.GetId())
		}
		return out, err
	})
}

// completeUsers: users, "id<TAB>display name" (a display name may hold
// spaces; the id is one word, and every user flag takes it).
func (a *app) completeUsers(cmd *cobra.Command) ([]string, cobra.ShellCompDirective) {
	return a.completeCall(cmd, func(ctx context.Context, c *clients) ([]string, error) {
		all, err := pages(ctx, c, 0, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			resp, err := c.reg.ListUsers(ctx, &guardv1.ListUsersRequest{Limit: size, PageToken: token})
			return render.Msgs(resp.GetUsers()), resp.GetNextPageToken(), err
		})
		var out []string
		for _, m := range all {
			u := m.(*guardv1.User)
			out = append(out, u.GetId()+"\t"+u.GetDisplayName())
		}
		return out, err
	})
}
