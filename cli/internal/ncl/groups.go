package ncl

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

var (
	cliScopeEnum = guardv1.CliScope(0).Descriptor()
	managerEnum  = guardv1.PackageManager(0).Descriptor()
)

func (a *app) groupsCmd() *cobra.Command {
	return noun("groups", "Agent groups: create, inspect, configure, restart",
		`  ncl groups create --name research --cli-scope group
  ncl groups list
  ncl groups config update <id> --memory 2g`,
		a.groupsList(), a.groupsGet(), a.groupsCreate(), a.groupsUpdate(), a.groupsDelete(),
		a.groupsRestart(), a.groupsConfig(), a.groupsPackages(), a.groupsMcp(),
	)
}

func (a *app) groupsList() *cobra.Command {
	var limit int32
	cmd := &cobra.Command{
		Use: "list", Short: "List agent groups", Example: "  ncl groups list -o json", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listPages(cmd, &guardv1.Group{}, limit, listGroupsPage)
		},
	}
	limitFlag(cmd, &limit)
	return cmd
}

// listGroupsPage is one page of ListGroups, for pages.
func listGroupsPage(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
	resp, err := c.reg.ListGroups(ctx, &guardv1.ListGroupsRequest{Limit: size, PageToken: token})
	return render.Msgs(resp.GetGroups()), resp.GetNextPageToken(), err
}

func (a *app) groupsGet() *cobra.Command {
	return &cobra.Command{
		Use: "get <id|name>", Short: "Show one agent group with its config",
		Long: `Show one agent group with its config. The argument is the group's id or,
when no group has that id, its exact name (two groups of that name: refused,
naming their ids).`,
		Example: "  ncl groups get ag_4888a21379a5cf01\n  ncl groups get research -q   # the id of the group named research",
		Args:    one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.groupArgs(&args[0])
			return a.do(cmd, func(ctx context.Context, c *clients) error {
				resp, err := c.reg.GetGroup(ctx, &guardv1.GetGroupRequest{Id: args[0]})
				if err != nil {
					return err
				}
				return a.printer().Object(resp.GetGroup())
			})
		},
	}
}

func (a *app) groupsCreate() *cobra.Command {
	var req guardv1.CreateGroupRequest
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an agent group",
		Long: `Create an agent group. --cli-scope says what the group's agents may do with
admin commands: disabled (nothing), group (their own group, held for approval
where the catalog says so) or global (any group — a wide blast radius).`,
		Example: "  ncl groups create --name research --cli-scope group",
		Args:    none,
	}
	scope := enumVar(cmd, "cli-scope", cliScopeEnum, "admin commands the group's agents may run")
	cmd.Flags().StringVar(&req.Name, "name", "", "group name")
	cmd.Flags().StringVar(&req.BaseImage, "base-image", "", "base image of the group's containers (default: the runner's)")
	cmd.Flags().StringVar(&req.PinnedHost, "pinned-host", "", "run the group's sessions only on runners whose token carries this host (or key=value label)")
	required(cmd, "name")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		req.CliScope = guardv1.CliScope(scope.val)
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.CreateGroup(ctx, &req)
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetGroup())
		})
	}
	return cmd
}

func (a *app) groupsUpdate() *cobra.Command {
	var name, image, host, instructions string
	cmd := &cobra.Command{
		Use: "update <id|name>", Short: "Rename a group, change its image or pinned host, or give its agent instructions",
		Example: "  ncl groups update ag_4888a21379a5cf01 --name research-2\n  ncl groups update ag_4888a21379a5cf01 --pinned-host ''   # unpin\n" +
			"  ncl groups update research --instructions-file task.md   # '-' reads standard input; '' removes them",
		Args: one("id"),
	}
	cmd.Flags().StringVar(&name, "name", "", "new name")
	cmd.Flags().StringVar(&image, "base-image", "", "new base image")
	cmd.Flags().StringVar(&host, "pinned-host", "", "new pinned host or key=value label selector ('' unpins; sessions move to a matching runner)")
	cmd.Flags().StringVar(&instructions, "instructions-file", "", "what the group's agent is told to do, from a file ('-': standard input; ''  removes them); its agents restart with them")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		req := &guardv1.UpdateGroupRequest{Name: name, BaseImage: image}
		if cmd.Flags().Changed("pinned-host") {
			req.PinnedHost = &host
		}
		if cmd.Flags().Changed("instructions-file") {
			text, err := readTextArg(cmd, instructions)
			if err != nil {
				return err
			}
			req.Instructions = &text
		}
		if name == "" && image == "" && req.PinnedHost == nil && req.Instructions == nil {
			return usagef("nothing to update: give --name, --base-image, --pinned-host or --instructions-file")
		}
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			req.Id = args[0]
			resp, err := c.reg.UpdateGroup(ctx, req)
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetGroup())
		})
	}
	return cmd
}

func (a *app) groupsDelete() *cobra.Command {
	return &cobra.Command{
		Use: "delete <id|name>", Short: "Delete an agent group and everything that hangs off it",
		Example: "  ncl groups delete ag_4888a21379a5cf01\n  ncl groups delete research", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.groupArgs(&args[0])
			return a.do(cmd, func(ctx context.Context, c *clients) error {
				resp, err := c.reg.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{Id: args[0]})
				if err != nil {
					return err
				}
				v, err := render.JSONValue(resp)
				if err != nil {
					return err
				}
				return a.printer().Value(v, fmt.Sprintf("deleted group %s%s", args[0], removedSummary(resp.GetRemoved())))
			})
		},
	}
}

func removedSummary(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return " (removed " + strings.Join(parts, ", ") + ")"
}

func (a *app) groupsRestart() *cobra.Command {
	var rebuild bool
	cmd := &cobra.Command{
		Use: "restart <id|name>", Short: "Restart the group's containers (after a config change)",
		Example: "  ncl groups restart ag_4888a21379a5cf01 --rebuild-image\n  ncl groups restart research", Args: one("id|name"),
	}
	cmd.Flags().BoolVar(&rebuild, "rebuild-image", false, "rebuild the group's image first (after package changes)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.RestartGroup(ctx, &guardv1.RestartGroupRequest{Group: args[0], RebuildImage: rebuild})
			if err != nil {
				return err
			}
			v, err := render.JSONValue(resp)
			if err != nil {
				return err
			}
			return a.printer().Value(v, fmt.Sprintf("restart requested for %d session(s) of group %s", resp.GetSessions(), args[0]))
		})
	}
	return cmd
}

func (a *app) groupsConfig() *cobra.Command {
	get := &cobra.Command{
		Use: "get <group>", Short: "Show a group's container config", Example: "  ncl groups config get ag_4888a21379a5cf01", Args: one("group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.groupArgs(&args[0])
			return a.do(cmd, func(ctx context.Context, c *clients) error {
				resp, err := c.reg.GetGroupConfig(ctx, &guardv1.GetGroupConfigRequest{Group: args[0]})
				if err != nil {
					return err
				}
				return a.printer().Object(resp.GetConfig())
			})
		},
	}
	var (
		cpus, memory  string
		holdApprovals int32
	)
	update := &cobra.Command{
		Use: "update <group>", Short: "Change cli scope, cpus, memory or hold quorum of a group",
		Example: "  ncl groups config update ag_4888a21379a5cf01 --cli-scope disabled --cpus 1.5 --memory 2g\n  ncl groups config update ag_4888a21379a5cf01 --memory ''   # the runner's --container-memory (none if unset)\n  ncl groups config update ag_4888a21379a5cf01 --hold-approvals 2",
		Args:    one("group"),
	}
	scope := enumVar(update, "cli-scope", cliScopeEnum, "admin commands the group's agents may run")
	update.Flags().StringVar(&cpus, "cpus", "", "CPU limit ('' falls back to the runner's --container-cpus)")
	update.Flags().StringVar(&memory, "memory", "", "memory limit ('' falls back to the runner's --container-memory)")
	update.Flags().Int32Var(&holdApprovals, "hold-approvals", 0, "distinct approvals every hold of the group needs (0 = scope default)")
	var agentCommand string
	var agentEnv []string
	update.Flags().StringVar(&agentCommand, "agent-command", "", "the agent's command, replacing the image's: words split on spaces, or a JSON array ('' = the image's)")
	update.Flags().StringArrayVar(&agentEnv, "agent-env", nil, "KEY=VALUE for the group's agents, non-secret (every read shows it; KEY= removes it); repeatable")
	update.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		req := &guardv1.UpdateGroupConfigRequest{CliScope: guardv1.CliScope(scope.val)}
		if err := agentSettings(cmd, req, agentCommand, agentEnv); err != nil {
			return err
		}
		if cmd.Flags().Changed("cpus") {
			req.Cpus = &cpus
		}
		if cmd.Flags().Changed("memory") {
			req.Memory = &memory
		}
		if cmd.Flags().Changed("hold-approvals") {
			req.HoldApprovals = &holdApprovals
		}
		if scope.val == 0 && req.Cpus == nil && req.Memory == nil && req.HoldApprovals == nil && req.AgentCommand == nil && len(req.AgentEnv) == 0 {
			return usagef("nothing to update: give --cli-scope, --cpus, --memory, --hold-approvals, --agent-command or --agent-env")
		}
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			req.Group = args[0]
			resp, err := c.reg.UpdateGroupConfig(ctx, req)
			if err != nil {
				return err
			}
			c.warned(resp)
			return a.printer().Object(resp.GetConfig())
		})
	}
	return noun("config", "A group's container config", "  ncl groups config get ag_4888a21379a5cf01", get, update)
}

func (a *app) groupsPackages() *cobra.Command {
	add := &cobra.Command{
		Use: "add <group> <package>...", Short: "Add packages to a group's image",
		Example: "  ncl groups packages add ag_4888a21379a5cf01 curl jq --manager apt",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("usage: %s <group> <package>... --manager apt|npm", cmd.CommandPath())
			}
			return nil
		},
	}
	addMgr := enumVar(add, "manager", managerEnum, "package manager")
	required(add, "manager")
	add.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{
				Group: args[0], Manager: guardv1.PackageManager(addMgr.val), Packages: args[1:],
			})
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetConfig())
		})
	}
	remove := &cobra.Command{
		Use: "remove <group> <package>", Short: "Remove a package from a group's image",
		Example: "  ncl groups packages remove ag_4888a21379a5cf01 jq --manager apt",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("usage: %s <group> <package> --manager apt|npm", cmd.CommandPath())
			}
			return nil
		},
	}
	rmMgr := enumVar(remove, "manager", managerEnum, "package manager")
	required(remove, "manager")
	remove.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.RemoveGroupPackage(ctx, &guardv1.RemoveGroupPackageRequest{
				Group: args[0], Manager: guardv1.PackageManager(rmMgr.val), Package: args[1],
			})
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetConfig())
		})
	}
	return noun("packages", "Packages installed into a group's image", "  ncl groups packages add ag_4888a21379a5cf01 curl --manager apt", add, remove)
}

func (a *app) groupsMcp() *cobra.Command {
	var srv guardv1.McpServer
	var env []string
	var replace bool
	add := &cobra.Command{
		Use: "add <group>", Short: "Add a guarded MCP server to a group (the runner hosts it; ncl mcp tools set decides its tools)",
		Long: `Add a guarded MCP server to a group. The runner hosts it, outside the agents'
containers; ncl mcp tools set decides its tools.

Its environment's values are write-only: only the server gets them. No read,
export, hold or card shows them — not to agents, bridges or people, the
operator included — only the names of the keys, each value as <redacted>.
With --replace, a value given as <redacted> keeps the one the server holds.`,
		Example: "  ncl groups mcp add ag_4888a21379a5cf01 --name files --command mcp-files --arg /data --env LOG=debug\n" +
			"  ncl groups mcp add research --name gh --command gh-mcp --env GITHUB_TOKEN=\"$(cat gh.token)\"\n" +
			"  ncl groups mcp add research --name gh --command gh-mcp-v2 --env GITHUB_TOKEN='<redacted>' --replace",
		Args: one("group"),
	}
	add.Flags().StringVar(&srv.Name, "name", "", "server name")
	add.Flags().StringVar(&srv.Command, "command", "", "command to run")
	add.Flags().StringArrayVar(&srv.Args, "arg", nil, "argument (repeatable)")
	add.Flags().StringArrayVar(&env, "env", nil, "environment KEY=VALUE (repeatable): only the server gets it, never the agent, and no read shows the value")
	add.Flags().BoolVar(&replace, "replace", false, "replace the group's server of that name (a value given as <redacted> keeps the server's)")
	add.Flags().StringVar(&srv.Image, "image", "", "docker runtime: the image of the server's own container (default: the group's agent image)")
	required(add, "name", "command")
	add.RunE = func(cmd *cobra.Command, args []string) error {
		e, err := kvPairs("env", env)
		if err != nil {
			return err
		}
		srv.Env = e
		a.groupArgs(&args[0])
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: args[0], Server: &srv, Replace: replace})
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetConfig())
		})
	}
	var name string
	remove := &cobra.Command{
		Use: "remove <group>", Short: "Remove an MCP server from a group",
		Example: "  ncl groups mcp remove ag_4888a21379a5cf01 --name files", Args: one("group"),
	}
	remove.Flags().StringVar(&name, "name", "", "server name")
	required(remove, "name")
	remove.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.RemoveGroupMcpServer(ctx, &guardv1.RemoveGroupMcpServerRequest{Group: args[0], Name: name})
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetConfig())
		})
	}
	return noun("mcp", "MCP servers of a group", "  ncl groups mcp add ag_4888a21379a5cf01 --name files --command mcp-files", add, remove)
}
