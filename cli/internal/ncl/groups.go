package ncl

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
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
		Example: "  ncl groups update research --name research-2\n  ncl groups update research --pinned-host ''   # unpin\n" +
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
		Example: "  ncl groups delete research\n  ncl groups delete research", Args: one("id|name"),
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
		Example: "  ncl groups restart research --rebuild-image\n  ncl groups restart research", Args: one("id|name"),
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

// groupViews are how a group prints (ncl groups list, get).
var groupViews = []render.View{
	render.For[*guardv1.Group](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.Group).GetId),
			render.C("NAME", (*guardv1.Group).GetName),
			render.C("CLI SCOPE", func(g *guardv1.Group) string { return enumword.String(g.GetConfig().GetCliScope()) }),
			render.C("BASE IMAGE", (*guardv1.Group).GetBaseImage),
			render.C("PINNED HOST", (*guardv1.Group).GetPinnedHost),
			render.C("CREATED", func(g *guardv1.Group) string { return render.Time(g.GetCreatedAt()) }),
		},
		Detail: []render.Col{
			render.C("CPUS", func(g *guardv1.Group) string { return g.GetConfig().GetCpus() }),
			render.C("MEMORY", func(g *guardv1.Group) string { return g.GetConfig().GetMemory() }),
			render.C("APT PACKAGES", func(g *guardv1.Group) string { return strings.Join(g.GetConfig().GetAptPackages(), " ") }),
			render.C("NPM PACKAGES", func(g *guardv1.Group) string { return strings.Join(g.GetConfig().GetNpmPackages(), " ") }),
			render.C("MCP SERVERS", func(g *guardv1.Group) string { return mcpNames(g.GetConfig().GetMcpServers()) }),
			render.C("CONFIG VERSION", func(g *guardv1.Group) string { return render.Num(g.GetConfig().GetVersion()) }),
		},
		ID: render.IDOf((*guardv1.Group).GetId),
	}),
}

func mcpNames(servers []*guardv1.McpServer) string {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.GetName()
	}
	return strings.Join(names, " ")
}

// Groups in the document, by name: each with its cli scope, base image,
// pinned host and its parts — packages (grouppackages.go), MCP servers
// (mcpservers.go) and their settings (mcp.go), the agent (groupconfig.go),
// egress (egress.go) and models (modelgroup.go).

var groupsState = &statePart{read: readGroups, plan: planGroups, check: checkGroups, sort: sortGroups}

type groupSpec struct {
	Name       string `yaml:"name"`
	CLIScope   string `yaml:"cliScope"`
	BaseImage  string `yaml:"baseImage,omitempty"`
	PinnedHost string `yaml:"pinnedHost,omitempty"`
	// Packages installed into the group's image, by manager.
	AptPackages []string `yaml:"aptPackages,omitempty"`
	NpmPackages []string `yaml:"npmPackages,omitempty"`
	// MCP servers the group's agents run. Env values are write-only: export
	// writes each as "<redacted>", a reference that apply reads as "keep the
	// value the server holds"; a value written out is set.
	MCPServers []mcpServerSpec `yaml:"mcpServers,omitempty"`
	// The agent: its command (after clawguard-init), its non-secret
	// environment and its instructions (groupconfig.go), and its way out
	// (egress.go).
	AgentCommand []string          `yaml:"agentCommand,omitempty"`
	AgentEnv     map[string]string `yaml:"agentEnv,omitempty"`
	Instructions string            `yaml:"instructions,omitempty"`
	Egress       *egressSpec       `yaml:"egress,omitempty"`
	// Its model providers, rules, default and budget (modelgroup.go).
	Models *groupModelsSpec `yaml:"models,omitempty"`
}

// readGroups reads every group with its parts but its models, and books
// its name.
func readGroups(ctx context.Context, c *clients, s *state, book groupBook) error {
	groups, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListGroups(ctx, &guardv1.ListGroupsRequest{Limit: size, PageToken: token})
		return msgs(r.GetGroups()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read groups: %w", err)
	}
	for _, m := range groups {
		g := m.(*guardv1.Group)
		if other, dup := book.id[g.GetName()]; dup {
			return fmt.Errorf("groups %s and %s are both called %q: a document names groups by name, rename one first", other, g.GetId(), g.GetName())
		}
		book.name[g.GetId()], book.id[g.GetName()] = g.GetName(), g.GetId()
		s.Groups = append(s.Groups, groupSpec{Name: g.GetName(), CLIScope: enumword.String(g.GetConfig().GetCliScope()),
			BaseImage: g.GetBaseImage(), PinnedHost: g.GetPinnedHost(),
			AptPackages: slices.Clone(g.GetConfig().GetAptPackages()), NpmPackages: slices.Clone(g.GetConfig().GetNpmPackages()),
			MCPServers: mcpSpecs(g.GetConfig().GetMcpServers())})
		spec := &s.Groups[len(s.Groups)-1]
		if err := readMCPSettings(ctx, c, g.GetId(), spec); err != nil {
			return err
		}
		readAgent(g, spec)
		if err := readEgress(ctx, c, g, spec); err != nil {
			return err
		}
	}
	return nil
}

// planGroups creates, changes and deletes groups; each group's parts are
// set after every group's own changes, created or changed.
func planGroups(cur, want *state) (p planned) {
	var changes, dels, parts []change

	groups := map[string]groupSpec{}
	for _, g := range cur.Groups {
		groups[g.Name] = g
	}
	for _, g := range want.Groups {
		old, ok := groups[g.Name]
		// The group's parts: what it lacks added, what it has and the
		// document drops deleted (with prune); an MCP server goes after
		// the settings and rules that name it.
		pk, pkDels := planPackages(old, g)
		srv, srvDels := planMCPServers(old, g)
		set, setDels := planMCPSettings(old, g)
		eg, egDels := planEgress(old, g)
		parts = append(parts, slices.Concat(pk, srv, set, planAgent(old, g), eg)...)
		dels = append(dels, slices.Concat(pkDels, setDels, egDels, srvDels)...)
		if !ok {
			changes = append(changes, change{'+', "group " + g.Name, func(ctx context.Context, c *clients, book groupBook) error {
				scope, err := enumword.Parse[guardv1.CliScope](g.CLIScope)
				if err != nil {
					return fmt.Errorf("group %s: cliScope: %w", g.Name, err)
				}
				r, err := c.reg.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: g.Name, CliScope: scope, BaseImage: g.BaseImage, PinnedHost: g.PinnedHost})
				if err == nil {
					book.id[g.Name], book.name[r.GetGroup().GetId()] = r.GetGroup().GetId(), g.Name
				}
				return err
			}})
			continue
		}
		if old.BaseImage != g.BaseImage || old.PinnedHost != g.PinnedHost {
			changes = append(changes, change{'~', fmt.Sprintf("group %s: baseImage %q → %q, pinnedHost %q → %q", g.Name, old.BaseImage, g.BaseImage, old.PinnedHost, g.PinnedHost),
				func(ctx context.Context, c *clients, book groupBook) error {
					pinned := g.PinnedHost
					_, err := c.reg.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: book.id[g.Name], BaseImage: g.BaseImage, PinnedHost: &pinned})
					return err
				}})
		}
		if old.CLIScope != g.CLIScope {
			changes = append(changes, change{'~', fmt.Sprintf("group %s: cliScope %s → %s", g.Name, old.CLIScope, g.CLIScope),
				func(ctx context.Context, c *clients, book groupBook) error {
					scope, err := enumword.Parse[guardv1.CliScope](g.CLIScope)
					if err != nil {
						return fmt.Errorf("group %s: cliScope: %w", g.Name, err)
					}
					_, err = c.reg.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: book.id[g.Name], CliScope: scope})
					return err
				}})
		}
	}
	for _, g := range cur.Groups {
		if !slices.ContainsFunc(want.Groups, func(w groupSpec) bool { return w.Name == g.Name }) {
			dels = append(dels, change{'-', "group " + g.Name + " (and everything of it: sessions, destinations, roles)", func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{Id: book.id[g.Name]})
				return err
			}})
		}
	}

	p.changes, p.dels = append(changes, parts...), dels
	return p
}

func checkGroups(s *state, once func(kind, key string) error) (err error) {
	for _, g := range s.Groups {
		err = firstErr(err, once("group", g.Name))
		for _, m := range g.MCPServers {
			err = firstErr(err, m.checkTools(g.Name))
		}
	}
	return err
}

func sortGroups(s *state) {
	slices.SortFunc(s.Groups, func(a, b groupSpec) int { return strings.Compare(a.Name, b.Name) })
	for _, g := range s.Groups {
		slices.Sort(g.AptPackages)
		slices.Sort(g.NpmPackages)
		slices.SortFunc(g.MCPServers, func(a, b mcpServerSpec) int { return strings.Compare(a.Name, b.Name) })
	}
}
