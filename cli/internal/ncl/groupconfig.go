package ncl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl groups config: a group's container config (cli scope, cpus, memory,
// hold quorum) and its agent (command, non-secret environment); in the
// document the agent's command, environment and instructions, under the
// group.

func (a *app) groupsConfig() *cobra.Command {
	get := &cobra.Command{
		Use: "get <group>", Short: "Show a group's container config", Example: "  ncl groups config get research", Args: one("group"),
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
		Example: "  ncl groups config update research --cli-scope disabled --cpus 1.5 --memory 2g\n  ncl groups config update research --memory ''   # the runner's --container-memory (none if unset)\n  ncl groups config update research --hold-approvals 2",
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
	return noun("config", "A group's container config", "  ncl groups config get research", get, update)
}

// agentSettings reads --agent-command and --agent-env into an update.
func agentSettings(cmd *cobra.Command, req *guardv1.UpdateGroupConfigRequest, command string, env []string) error {
	if cmd.Flags().Changed("agent-command") {
		args, err := commandWords(command)
		if err != nil {
			return err
		}
		req.AgentCommand = &guardv1.AgentCommand{Args: args}
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--agent-env %q: want KEY=VALUE (KEY= removes it)", kv)
		}
		if req.AgentEnv == nil {
			req.AgentEnv = map[string]string{}
		}
		req.AgentEnv[k] = v
	}
	return nil
}

// commandWords reads a command: a JSON array of words, or words split on
// white space ("" = none: the image's command).
func commandWords(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		var words []string
		if err := json.Unmarshal([]byte(s), &words); err != nil {
			return nil, usagef("--agent-command: not a JSON array of strings: %v", err)
		}
		return words, nil
	}
	return strings.Fields(s), nil
}

// readTextArg reads a file flag's text: "-" is standard input, "" none.
func readTextArg(cmd *cobra.Command, path string) (string, error) {
	var b []byte
	var err error
	switch path {
	case "":
		return "", nil
	case "-":
		b, err = io.ReadAll(cmd.InOrStdin())
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", usagef("%v", err)
	}
	return string(b), nil
}

// groupConfigViews are how a group's container config prints.
var groupConfigViews = []render.View{
	render.For[*guardv1.GroupConfig](render.View{
		Cols: []render.Col{
			render.C("VERSION", func(g *guardv1.GroupConfig) string { return render.Num(g.GetVersion()) }),
			render.C("CLI SCOPE", func(g *guardv1.GroupConfig) string { return enumword.String(g.GetCliScope()) }),
			render.C("CPUS", (*guardv1.GroupConfig).GetCpus),
			render.C("MEMORY", (*guardv1.GroupConfig).GetMemory),
			render.C("APT PACKAGES", func(g *guardv1.GroupConfig) string { return strings.Join(g.GetAptPackages(), " ") }),
			render.C("NPM PACKAGES", func(g *guardv1.GroupConfig) string { return strings.Join(g.GetNpmPackages(), " ") }),
			render.C("MCP SERVERS", func(g *guardv1.GroupConfig) string { return mcpNames(g.GetMcpServers()) }),
		},
		Detail: []render.Col{
			render.C("HOLD APPROVALS", func(g *guardv1.GroupConfig) string {
				if g.GetHoldApprovals() == 0 {
					return "default"
				}
				return render.Num(int64(g.GetHoldApprovals()))
			}),
			render.C("AGENT COMMAND", func(g *guardv1.GroupConfig) string {
				if len(g.GetAgentCommand()) == 0 {
					return "the image's"
				}
				return strings.Join(g.GetAgentCommand(), " ")
			}),
			render.C("AGENT ENV", func(g *guardv1.GroupConfig) string { return render.KeyValues(g.GetAgentEnv()) }),
		},
		ID: render.IDOf(func(g *guardv1.GroupConfig) string { return render.Num(g.GetVersion()) }),
	}),
}

// readAgent fills in g's agent settings from the group.
func readAgent(grp *guardv1.Group, g *groupSpec) {
	g.AgentCommand = slices.Clone(grp.GetConfig().GetAgentCommand())
	if env := grp.GetConfig().GetAgentEnv(); len(env) > 0 {
		g.AgentEnv = maps.Clone(env)
	}
	g.Instructions = grp.GetInstructions()
}

// planAgent lists the changes of a group's agent settings (after the group
// exists).
func planAgent(cur, want groupSpec) (changes []change) {
	group := want.Name
	if !slices.Equal(cur.AgentCommand, want.AgentCommand) || !maps.Equal(cur.AgentEnv, want.AgentEnv) {
		changes = append(changes, change{'~', fmt.Sprintf("group %s: agent command %q, environment %s", group,
			strings.Join(want.AgentCommand, " "), strings.Join(sortedKeys(want.AgentEnv), ", ")), setAgent(cur, want)})
	}
	if cur.Instructions != want.Instructions {
		text := want.Instructions
		changes = append(changes, change{'~', fmt.Sprintf("group %s: instructions (%d bytes)", group, len(text)),
			func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: idOr(book, group), Instructions: &text})
				return err
			}})
	}
	return changes
}

// setAgent sets the agent command and environment as want has them (a
// variable cur has and want drops is removed).
func setAgent(cur, want groupSpec) func(ctx context.Context, c *clients, book groupBook) error {
	return func(ctx context.Context, c *clients, book groupBook) error {
		env := map[string]string{}
		for k := range cur.AgentEnv {
			env[k] = ""
		}
		maps.Copy(env, want.AgentEnv)
		args := want.AgentCommand
		if args == nil {
			args = []string{}
		}
		_, err := c.reg.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: idOr(book, want.Name),
			AgentCommand: &guardv1.AgentCommand{Args: args}, AgentEnv: env})
		return err
	}
}

func sortedKeys(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
