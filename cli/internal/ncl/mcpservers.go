package ncl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
)

// ncl groups mcp: a group's guarded MCP servers (the runner hosts them,
// outside the agents' containers); in the document the group's mcpServers,
// their environment write-only: export writes each value as "<redacted>", a
// reference that apply reads as "keep the value the server holds"; a value
// written out is set. Their tools' settings are mcp.go's.

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
		Example: "  ncl groups mcp add research --name files --command mcp-files --arg /data --env LOG=debug\n" +
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
		Example: "  ncl groups mcp remove research --name files", Args: one("group"),
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
	return noun("mcp", "MCP servers of a group", "  ncl groups mcp add research --name files --command mcp-files", add, remove)
}

type mcpServerSpec struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty"`
	Image   string            `yaml:"image,omitempty"`
	// Its tools' settings (mcp.go): the default of the tools nobody
	// set, and each tool's own.
	Default *mcpSettingSpec `yaml:"default,omitempty"`
	Tools   []mcpToolSpec   `yaml:"tools,omitempty"`
}

func (m mcpServerSpec) equal(o mcpServerSpec) bool {
	return m.Name == o.Name && m.Command == o.Command && slices.Equal(m.Args, o.Args) && maps.Equal(m.Env, o.Env) && m.Image == o.Image
}

// setEnv are the env keys whose values the document writes out (set on
// apply), sorted; the others are "<redacted>" references to the values the
// server holds.
func (m mcpServerSpec) setEnv() []string {
	var out []string
	for k, v := range m.Env {
		if v != secret.Redacted {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func mcpSpecs(in []*guardv1.McpServer) []mcpServerSpec {
	var out []mcpServerSpec
	for _, m := range in {
		spec := mcpServerSpec{Name: m.GetName(), Command: m.GetCommand(), Args: slices.Clone(m.GetArgs()), Image: m.GetImage()}
		if len(m.GetEnv()) > 0 {
			spec.Env = maps.Clone(m.GetEnv())
		}
		out = append(out, spec)
	}
	return out
}

// planMCPServers lists the servers want adds or changes in a group (old:
// as it is) and those it drops (deletions).
func planMCPServers(old, g groupSpec) (adds, dels []change) {
	// MCP servers: a changed one is replaced in one call, which keeps
	// each env value the document writes as "<redacted>" (the server
	// never reads one out; a value written out is set, and the server
	// cannot say whether it is the one it holds).
	for _, m := range g.MCPServers {
		i := slices.IndexFunc(old.MCPServers, func(o mcpServerSpec) bool { return o.Name == m.Name })
		if i >= 0 && old.MCPServers[i].equal(m) {
			continue
		}
		op, what := byte('+'), fmt.Sprintf("mcp server %s of group %s: %s", m.Name, g.Name, strings.Join(append([]string{m.Command}, m.Args...), " "))
		if i >= 0 {
			op = '~'
		}
		if set := m.setEnv(); len(set) > 0 {
			what += " (env " + strings.Join(set, ", ") + " set from the document)"
		}
		replace := i >= 0
		adds = append(adds, change{op, what, func(ctx context.Context, c *clients, book groupBook) error {
			_, err := c.reg.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: idOr(book, g.Name), Replace: replace,
				Server: &guardv1.McpServer{Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env, Image: m.Image}})
			return err
		}})
	}
	for _, o := range old.MCPServers {
		if !slices.ContainsFunc(g.MCPServers, func(m mcpServerSpec) bool { return m.Name == o.Name }) {
			dels = append(dels, change{'-', fmt.Sprintf("mcp server %s of group %s", o.Name, g.Name), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.RemoveGroupMcpServer(ctx, &guardv1.RemoveGroupMcpServerRequest{Group: idOr(book, g.Name), Name: o.Name})
				return err
			}})
		}
	}
	return adds, dels
}
