package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/pkgname"
	"github.com/clawguard/clawguard/server/internal/placement"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Config values are checked before they ever reach an image build or a
// container's limits (package names: pkgname).
var (
	mcpName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	// Docker-style limits: "1.5" CPUs, "512m" / "2g" memory.
	cpusValue   = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?|\.[0-9]+)$`)
	memoryValue = regexp.MustCompile(`^[0-9]+[bkmgBKMG]?$`)
	// An image reference or a host label: no spaces, no shell metacharacters.
	imageRef  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)
	hostLabel = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:=/-]{0,127}$`)
)

// checkPlacement validates the optional base image and pin: a host, or a
// key=value selector over runner token labels (placement.Matches).
func checkPlacement(image string, pin *string) error {
	if image != "" && !imageRef.MatchString(image) {
		return invalid("base_image", "%q is not an image reference", image)
	}
	if pin == nil || *pin == "" {
		return nil
	}
	if k, v, ok := strings.Cut(*pin, "="); ok {
		if !labelKey.MatchString(k) || !labelValue.MatchString(v) {
			return invalid("pinned_host", "%q is not a key=value label selector", *pin)
		}
		return nil
	}
	if !hostLabel.MatchString(*pin) {
		return invalid("pinned_host", "%q is not a host label", *pin)
	}
	return nil
}

// mcpServer is the JSONB shape of container_configs.mcp_servers.
type mcpServer struct {
	Name    string            `json:"name"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// groupConfig is a container_configs row.
type groupConfig struct {
	cliScope, cpus, memory string
	apt, npm               []string
	mcp                    []mcpServer
	version                int64
	holdApprovals          int32 // quorum of the group's holds (0 = default)
}

func (c groupConfig) proto() *guardv1.GroupConfig {
	out := &guardv1.GroupConfig{
		CliScope:      cliScopeProto(c.cliScope),
		Cpus:          c.cpus,
		Memory:        c.memory,
		AptPackages:   c.apt,
		NpmPackages:   c.npm,
		Version:       c.version,
		HoldApprovals: c.holdApprovals,
	}
	for _, m := range c.mcp {
		out.McpServers = append(out.McpServers, &guardv1.McpServer{Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env})
	}
	return out
}

func cliScopeProto(s string) guardv1.CliScope {
	switch s {
	case "disabled":
		return guardv1.CliScope_CLI_SCOPE_DISABLED
	case "global":
		return guardv1.CliScope_CLI_SCOPE_GLOBAL
	}
	return guardv1.CliScope_CLI_SCOPE_GROUP
}

// cliScopeColumn maps the enum; UNSPECIFIED is "" (unchanged / default).
func cliScopeColumn(s guardv1.CliScope) (string, error) {
	switch s {
	case guardv1.CliScope_CLI_SCOPE_UNSPECIFIED:
		return "", nil
	case guardv1.CliScope_CLI_SCOPE_DISABLED:
		return "disabled", nil
	case guardv1.CliScope_CLI_SCOPE_GROUP:
		return "group", nil
	case guardv1.CliScope_CLI_SCOPE_GLOBAL:
		return "global", nil
	}
	return "", invalid("cli_scope", "unknown value %d (want disabled, group or global)", s)
}

const groupColumns = `g.id, g.name, g.base_image, g.pinned_host, g.created_at, g.instructions,
	COALESCE(c.cli_scope, 'group'), COALESCE(c.cpus, ''), COALESCE(c.memory, ''),
	COALESCE(c.apt_packages, '{}'), COALESCE(c.npm_packages, '{}'), COALESCE(c.mcp_servers, '[]'), COALESCE(c.version, 0),
	COALESCE(c.hold_approvals, 0)`

const groupFrom = ` FROM agent_groups g LEFT JOIN container_configs c ON c.agent_group_id = g.id`

func scanGroup(row pgx.Row) (*guardv1.Group, error) {
	var (
		g       guardv1.Group
		created time.Time
		c       groupConfig
		mcp     []byte
	)
	if err := row.Scan(&g.Id, &g.Name, &g.BaseImage, &g.PinnedHost, &created, &g.Instructions,
		&c.cliScope, &c.cpus, &c.memory, &c.apt, &c.npm, &mcp, &c.version, &c.holdApprovals); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(mcp, &c.mcp); err != nil {
		return nil, fmt.Errorf("decode mcp_servers of %s: %w", g.Id, err)
	}
	g.CreatedAt = ts(created)
	g.Config = c.proto()
	return &g, nil
}

// ReadGroup reads a group with its container config (a group without a
// config row reads as the defaults) through q, a pool or a transaction. It
// applies no caller scoping: for infrastructure reads such as a runner's
// view of the sessions it hosts.
func ReadGroup(ctx context.Context, q store.Querier, id string) (*guardv1.Group, error) {
	return scanGroup(q.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, id))
}

// CreateGroup creates a group and its container config in one transaction.
func (s *Service) CreateGroup(ctx context.Context, req *guardv1.CreateGroupRequest) (*guardv1.CreateGroupResponse, error) {
	name := strings.TrimSpace(req.GetName())
	if err := required("name", name); err != nil {
		return nil, err
	}
	scope, err := cliScopeColumn(req.GetCliScope())
	if err != nil {
		return nil, err
	}
	if err := checkPlacement(req.GetBaseImage(), &req.PinnedHost); err != nil {
		return nil, err
	}
	if scope == "" {
		scope = "group"
	}
	id := store.NewID("ag_", 8)
	var g *guardv1.Group
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agent_groups (id, name, base_image, pinned_host) VALUES ($1, $2, $3, $4)`,
			id, name, req.GetBaseImage(), req.GetPinnedHost()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ($1, $2)`, id, scope); err != nil {
			return err
		}
		g, err = scanGroup(tx.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, id))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.CreateGroupResponse{Group: g}, nil
}

// GetGroup reads a group; a group the caller may not see reads as NotFound.
func (s *Service) GetGroup(ctx context.Context, req *guardv1.GetGroupRequest) (*guardv1.GetGroupResponse, error) {
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if !v.sees(req.GetId()) {
		return nil, notFound("group %q not found", req.GetId())
	}
	g, err := scanGroup(s.pool.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, req.GetId()))
	if store.IsNoRows(err) {
		return nil, notFound("group %q not found", req.GetId())
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.GetGroupResponse{Group: v.redact(g)}, nil
}

// ListGroups lists the groups the caller may see, by name.
func (s *Service) ListGroups(ctx context.Context, _ *guardv1.ListGroupsRequest) (*guardv1.ListGroupsResponse, error) {
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+groupColumns+groupFrom+` WHERE ($1 OR g.id = ANY($2)) ORDER BY g.name`, v.all, v.groups)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListGroupsResponse{}
	for rows.Next() {
		g, err := scanGroup(rows)
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, v.redact(g))
	}
	return out, rows.Err()
}

// UpdateGroup renames, re-images or re-pins a group (empty = unchanged;
// a re-pin moves sessions off runners the new pin does not match). A
// new base image is a container change: the config version is bumped and
// every active session gets a rebuild.
func (s *Service) UpdateGroup(ctx context.Context, req *guardv1.UpdateGroupRequest) (*guardv1.UpdateGroupResponse, error) {
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	if req.Name != "" && strings.TrimSpace(req.Name) == "" {
		return nil, invalid("name", "blank")
	}
	if err := checkPlacement(req.GetBaseImage(), req.PinnedHost); err != nil {
		return nil, err
	}
	var g *guardv1.Group
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var oldImage string
		err := tx.QueryRow(ctx, `SELECT base_image FROM agent_groups WHERE id = $1 FOR UPDATE`, req.GetId()).Scan(&oldImage)
		if store.IsNoRows(err) {
			return notFound("group %q not found", req.GetId())
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_groups SET
			name = COALESCE(NULLIF($2, ''), name),
			base_image = COALESCE(NULLIF($3, ''), base_image),
			pinned_host = COALESCE($4, pinned_host)
			WHERE id = $1`, req.GetId(), strings.TrimSpace(req.GetName()), req.GetBaseImage(), req.PinnedHost); err != nil {
			return err
		}
		if req.PinnedHost != nil {
			// Sessions the new pin does not match leave their runner; the
			// lease sweep places them on one it does.
			if _, err := placement.UnplaceTx(ctx, tx, req.GetId(), ""); err != nil {
				return err
			}
		}
		if req.GetBaseImage() != "" && req.GetBaseImage() != oldImage {
			if _, err := configChanged(ctx, tx, req.GetId(), "base image changed", true); err != nil {
				return err
			}
		}
		g, err = scanGroup(tx.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, req.GetId()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.UpdateGroupResponse{Group: g}, nil
}

// groupCascade is the seed's group-delete set (groups.test.ts), in delete
// order: each statement removes one kind of dependent row and is counted.
// The foreign keys cascade the same rows; deleting them explicitly first
// is what makes the counts exact.
var groupCascade = []struct{ key, sql string }{
	{"holds", `DELETE FROM holds WHERE agent_group_id = $1 OR session_id IN (SELECT id FROM sessions WHERE agent_group_id = $1)`},
	{"pending_questions", `DELETE FROM pending_questions WHERE agent_group_id = $1 OR session_id IN (SELECT id FROM sessions WHERE agent_group_id = $1)`},
	{"agent_destinations_owned", `DELETE FROM agent_destinations WHERE agent_group_id = $1`},
	{"agent_destinations_pointing", `DELETE FROM agent_destinations WHERE target_agent_group_id = $1`},
	{"pending_channel_registrations", `DELETE FROM pending_channel_registrations WHERE agent_group_id = $1`},
	{"messaging_group_agents", `DELETE FROM messaging_group_agents WHERE agent_group_id = $1`},
	{"agent_group_members", `DELETE FROM agent_group_members WHERE agent_group_id = $1`},
	{"user_roles", `DELETE FROM user_roles WHERE agent_group_id = $1`},
	{"agent_message_policies", `DELETE FROM agent_message_policies WHERE from_agent_group_id = $1 OR to_agent_group_id = $1`},
	{"container_configs", `DELETE FROM container_configs WHERE agent_group_id = $1`},
	{"sessions", `DELETE FROM sessions WHERE agent_group_id = $1`},
}

// DeleteGroup deletes a group and every row that depends on it, in one
// transaction, and counts what went per table.
func (s *Service) DeleteGroup(ctx context.Context, req *guardv1.DeleteGroupRequest) (*guardv1.DeleteGroupResponse, error) {
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	removed := map[string]int64{}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM agent_groups WHERE id = $1 FOR UPDATE`, req.GetId()).Scan(&id)
		if store.IsNoRows(err) {
			return notFound("group %q not found", req.GetId())
		}
		if err != nil {
			return err
		}
		for _, c := range groupCascade {
			tag, err := tx.Exec(ctx, c.sql, id)
			if err != nil {
				return fmt.Errorf("delete %s: %w", c.key, err)
			}
			removed[c.key] = tag.RowsAffected()
		}
		_, err = tx.Exec(ctx, `DELETE FROM agent_groups WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.DeleteGroupResponse{Removed: removed}, nil
}

// lockConfig locks a group's config row (creating the default row when the
// group has none) and reads it; an unknown group is NotFound.
func lockConfig(ctx context.Context, tx pgx.Tx, group string) (groupConfig, error) {
	var c groupConfig
	if err := required("group", group); err != nil {
		return c, err
	}
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM agent_groups WHERE id = $1 FOR SHARE`, group).Scan(&id)
	if store.IsNoRows(err) {
		return c, notFound("group %q not found", group)
	}
	if err != nil {
		return c, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO container_configs (agent_group_id) VALUES ($1) ON CONFLICT DO NOTHING`, group); err != nil {
		return c, err
	}
	return readConfig(ctx, tx, group, true)
}

func readConfig(ctx context.Context, q store.Querier, group string, forUpdate bool) (groupConfig, error) {
	var (
		c   groupConfig
		mcp []byte
	)
	sql := `SELECT cli_scope, cpus, memory, apt_packages, npm_packages, mcp_servers, version, hold_approvals
		FROM container_configs WHERE agent_group_id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	err := q.QueryRow(ctx, sql, group).Scan(&c.cliScope, &c.cpus, &c.memory, &c.apt, &c.npm, &mcp, &c.version, &c.holdApprovals)
	if store.IsNoRows(err) {
		// A group without a row reads as the defaults.
		return groupConfig{cliScope: "group", apt: []string{}, npm: []string{}}, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(mcp, &c.mcp); err != nil {
		return c, fmt.Errorf("decode mcp_servers of %s: %w", group, err)
	}
	return c, nil
}

// writeConfig stores c; containerChange bumps the version and queues a
// restart (rebuild: a new image) for every active session of the group.
func writeConfig(ctx context.Context, tx pgx.Tx, group string, c groupConfig, containerChange bool, reason string, rebuild bool) (groupConfig, error) {
	mcp, err := json.Marshal(orEmpty(c.mcp))
	if err != nil {
		return c, fmt.Errorf("encode mcp servers: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE container_configs SET cli_scope = $2, cpus = $3, memory = $4,
		apt_packages = $5, npm_packages = $6, mcp_servers = $7, hold_approvals = $8, updated_at = now() WHERE agent_group_id = $1`,
		group, c.cliScope, c.cpus, c.memory, orEmpty(c.apt), orEmpty(c.npm), mcp, c.holdApprovals); err != nil {
		return c, err
	}
	if containerChange {
		if c.version, err = configChanged(ctx, tx, group, reason, rebuild); err != nil {
			return c, err
		}
	}
	return c, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// configChanged bumps the group's config version and queues a restart push
// for each active session, in the caller's transaction.
func configChanged(ctx context.Context, tx pgx.Tx, group, reason string, rebuild bool) (int64, error) {
	var version int64
	err := tx.QueryRow(ctx, `INSERT INTO container_configs (agent_group_id, version) VALUES ($1, 2)
		ON CONFLICT (agent_group_id) DO UPDATE SET version = container_configs.version + 1, updated_at = now()
		RETURNING version`, group).Scan(&version)
	if err != nil {
		return 0, fmt.Errorf("bump config version: %w", err)
	}
	if _, err := pushes.RestartGroupTx(ctx, tx, group, reason, rebuild, version); err != nil {
		return 0, err
	}
	return version, nil
}

// GetGroupConfig reads a group's container config.
func (s *Service) GetGroupConfig(ctx context.Context, req *guardv1.GetGroupConfigRequest) (*guardv1.GetGroupConfigResponse, error) {
	g, err := s.GetGroup(ctx, &guardv1.GetGroupRequest{Id: req.GetGroup()})
	if status.Code(err) == codes.InvalidArgument {
		return nil, invalid("group", "required")
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.GetGroupConfigResponse{Config: g.GetGroup().GetConfig()}, nil
}

// UpdateGroupConfig changes cli_scope and limits (unset = unchanged; an
// empty limit removes it). A limit change restarts the group's containers.
func (s *Service) UpdateGroupConfig(ctx context.Context, req *guardv1.UpdateGroupConfigRequest) (*guardv1.UpdateGroupConfigResponse, error) {
	scope, err := cliScopeColumn(req.GetCliScope())
	if err != nil {
		return nil, err
	}
	if req.Cpus != nil && *req.Cpus != "" && !cpusValue.MatchString(*req.Cpus) {
		return nil, invalid("cpus", "%q is not a number of CPUs (e.g. 1.5)", *req.Cpus)
	}
	if req.Memory != nil && *req.Memory != "" && !memoryValue.MatchString(*req.Memory) {
		return nil, invalid("memory", "%q is not a memory size (e.g. 512m, 2g)", *req.Memory)
	}
	if req.HoldApprovals != nil {
		if err := validApprovals("hold_approvals", *req.HoldApprovals); err != nil {
			return nil, err
		}
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *groupConfig) (configChange, error) {
		limits := false
		if scope != "" {
			c.cliScope = scope
		}
		if req.Cpus != nil && *req.Cpus != c.cpus {
			c.cpus, limits = *req.Cpus, true
		}
		if req.Memory != nil && *req.Memory != c.memory {
			c.memory, limits = *req.Memory, true
		}
		if req.HoldApprovals != nil {
			c.holdApprovals = *req.HoldApprovals
		}
		return configChange{container: limits, reason: "resource limits changed", rebuild: false}, nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.UpdateGroupConfigResponse{Config: out.proto()}, nil
}

// configChange is what an edit of a group's config did to its container.
type configChange struct {
	container bool   // the container must restart
	reason    string // why, for the restart push
	rebuild   bool   // the image must be rebuilt first
}

// changeConfig locks the group's config, lets change edit it, and writes it
// back (bumping the version and queueing restarts as the change says), in
// one transaction.
func (s *Service) changeConfig(ctx context.Context, group string, change func(c *groupConfig) (configChange, error)) (groupConfig, error) {
	var out groupConfig
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		c, err := lockConfig(ctx, tx, group)
		if err != nil {
			return err
		}
		ch, err := change(&c)
		if err != nil {
			return err
		}
		out, err = writeConfig(ctx, tx, group, c, ch.container, ch.reason, ch.rebuild)
		return err
	})
	return out, err
}

func packageList(c *groupConfig, m guardv1.PackageManager) (*[]string, func(string) bool, error) {
	switch m {
	case guardv1.PackageManager_PACKAGE_MANAGER_APT:
		return &c.apt, pkgname.Apt, nil
	case guardv1.PackageManager_PACKAGE_MANAGER_NPM:
		return &c.npm, pkgname.Npm, nil
	case guardv1.PackageManager_PACKAGE_MANAGER_UNSPECIFIED:
		return nil, nil, invalid("manager", "required: apt or npm")
	}
	return nil, nil, invalid("manager", "unknown value %d (want apt or npm)", m)
}

// AddGroupPackage adds packages to the group's image: validated names, no
// duplicates; anything new bumps the version and rebuilds.
func (s *Service) AddGroupPackage(ctx context.Context, req *guardv1.AddGroupPackageRequest) (*guardv1.AddGroupPackageResponse, error) {
	if _, valid, err := packageList(&groupConfig{}, req.GetManager()); err != nil {
		return nil, err
	} else {
		if len(req.GetPackages()) == 0 {
			return nil, invalid("packages", "required")
		}
		for _, p := range req.GetPackages() {
			if !valid(p) {
				return nil, invalid("packages", "%q is not a valid package name", p)
			}
		}
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *groupConfig) (configChange, error) {
		list, _, _ := packageList(c, req.GetManager())
		added := false
		for _, p := range req.GetPackages() {
			if !slices.Contains(*list, p) {
				*list = append(*list, p)
				added = true
			}
		}
		return configChange{container: added, reason: "packages added", rebuild: true}, nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.AddGroupPackageResponse{Config: out.proto()}, nil
}

// RemoveGroupPackage removes a package; one the group does not have is NotFound.
func (s *Service) RemoveGroupPackage(ctx context.Context, req *guardv1.RemoveGroupPackageRequest) (*guardv1.RemoveGroupPackageResponse, error) {
	if _, _, err := packageList(&groupConfig{}, req.GetManager()); err != nil {
		return nil, err
	}
	if err := required("package", req.GetPackage()); err != nil {
		return nil, err
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *groupConfig) (configChange, error) {
		list, _, _ := packageList(c, req.GetManager())
		i := slices.Index(*list, req.GetPackage())
		if i < 0 {
			return configChange{}, notFound("group %q has no package %q", req.GetGroup(), req.GetPackage())
		}
		*list = slices.Delete(*list, i, i+1)
		return configChange{container: true, reason: "package removed", rebuild: true}, nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.RemoveGroupPackageResponse{Config: out.proto()}, nil
}

// AddGroupMcpServer adds an MCP server (unique by name) and restarts the
// group's containers.
func (s *Service) AddGroupMcpServer(ctx context.Context, req *guardv1.AddGroupMcpServerRequest) (*guardv1.AddGroupMcpServerResponse, error) {
	srv := req.GetServer()
	if srv == nil {
		return nil, invalid("server", "required")
	}
	if !mcpName.MatchString(srv.GetName()) {
		return nil, invalid("server.name", "%q is not a valid MCP server name (letters, digits, . _ -)", srv.GetName())
	}
	if err := required("server.command", strings.TrimSpace(srv.GetCommand())); err != nil {
		return nil, err
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *groupConfig) (configChange, error) {
		if slices.ContainsFunc(c.mcp, func(m mcpServer) bool { return m.Name == srv.GetName() }) {
			return configChange{}, status.Errorf(codes.AlreadyExists, "group %q already has MCP server %q", req.GetGroup(), srv.GetName())
		}
		c.mcp = append(c.mcp, mcpServer{Name: srv.GetName(), Command: srv.GetCommand(), Args: srv.GetArgs(), Env: srv.GetEnv()})
		return configChange{container: true, reason: "MCP server added", rebuild: false}, nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.AddGroupMcpServerResponse{Config: out.proto()}, nil
}

// RemoveGroupMcpServer removes an MCP server by name.
func (s *Service) RemoveGroupMcpServer(ctx context.Context, req *guardv1.RemoveGroupMcpServerRequest) (*guardv1.RemoveGroupMcpServerResponse, error) {
	if err := required("name", req.GetName()); err != nil {
		return nil, err
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *groupConfig) (configChange, error) {
		i := slices.IndexFunc(c.mcp, func(m mcpServer) bool { return m.Name == req.GetName() })
		if i < 0 {
			return configChange{}, notFound("group %q has no MCP server %q", req.GetGroup(), req.GetName())
		}
		c.mcp = slices.Delete(c.mcp, i, i+1)
		return configChange{container: true, reason: "MCP server removed", rebuild: false}, nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.RemoveGroupMcpServerResponse{Config: out.proto()}, nil
}

// RestartGroup queues a restart for every active session of the group.
func (s *Service) RestartGroup(ctx context.Context, req *guardv1.RestartGroupRequest) (*guardv1.RestartGroupResponse, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		c, err := lockConfig(ctx, tx, req.GetGroup())
		if err != nil {
			return err
		}
		ids, err := pushes.RestartGroupTx(ctx, tx, req.GetGroup(), "restart requested", req.GetRebuildImage(), c.version)
		n = len(ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.RestartGroupResponse{Sessions: int32(n)}, nil
}
