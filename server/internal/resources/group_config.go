package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// MCPServer is the JSONB shape of container_configs.mcp_servers.
type MCPServer struct {
	Name    string            `json:"name"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Image runs the server's own container (docker runtime); "" = the
	// group's agent image.
	Image string `json:"image,omitempty"`
}

func (m MCPServer) equal(o MCPServer) bool {
	return m.Name == o.Name && m.Command == o.Command && slices.Equal(m.Args, o.Args) && maps.Equal(m.Env, o.Env) && m.Image == o.Image
}

// GroupConfig is a container_configs row.
type GroupConfig struct {
	CLIScope, CPUs, Memory string
	Apt, Npm               []string
	MCP                    []MCPServer
	Version                int64
	HoldApprovals          int32             // quorum of the group's holds (0 = default)
	AgentCommand           []string          // replaces the image's command ([] = the image's)
	AgentEnv               map[string]string // non-secret agent environment
}

func (c GroupConfig) proto() (*guardv1.GroupConfig, error) {
	scope := c.CLIScope
	if scope == "" {
		scope = "group" // a group without a config row reads as group
	}
	cliScope, err := enumFromColumn[guardv1.CliScope]("cli_scope", scope)
	if err != nil {
		return nil, err
	}
	out := &guardv1.GroupConfig{
		CliScope:      cliScope,
		Cpus:          c.CPUs,
		Memory:        c.Memory,
		AptPackages:   c.Apt,
		NpmPackages:   c.Npm,
		Version:       c.Version,
		HoldApprovals: c.HoldApprovals,
		AgentCommand:  c.AgentCommand,
		AgentEnv:      c.AgentEnv,
	}
	for _, m := range c.MCP {
		out.McpServers = append(out.McpServers, &guardv1.McpServer{Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env, Image: m.Image})
	}
	return out, nil
}

// CLIScope is a group's cli_scope: "group" when it has no config row (the
// default), as the admin baseline reads it.
func CLIScope(ctx context.Context, q store.Querier, group string) (string, error) {
	var scope string
	err := q.QueryRow(ctx, `SELECT cli_scope FROM container_configs WHERE agent_group_id = $1`, group).Scan(&scope)
	if errors.Is(err, pgx.ErrNoRows) {
		return "group", nil
	}
	return scope, store.Fault("cli_scope", err)
}

// LockConfigTx locks a group's config row (creating the default row when
// the group has none) and reads it; an unknown group is NotFound. It is the
// one lock of a group's container config: the admin edits here and an
// agent's approved self-modification (selfmod) both take it, so their
// read-modify-writes serialize.
func LockConfigTx(ctx context.Context, tx pgx.Tx, group string) (GroupConfig, error) {
	var c GroupConfig
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

func readConfig(ctx context.Context, q store.Querier, group string, forUpdate bool) (GroupConfig, error) {
	var (
		c   GroupConfig
		mcp []byte
	)
	sql := `SELECT cli_scope, cpus, memory, apt_packages, npm_packages, mcp_servers, version, hold_approvals,
		agent_command, agent_env FROM container_configs WHERE agent_group_id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	err := q.QueryRow(ctx, sql, group).Scan(&c.CLIScope, &c.CPUs, &c.Memory, &c.Apt, &c.Npm, &mcp, &c.Version, &c.HoldApprovals,
		&c.AgentCommand, &c.AgentEnv)
	if store.IsNoRows(err) {
		// A group without a row reads as the defaults.
		return GroupConfig{CLIScope: "group", Apt: []string{}, Npm: []string{}, AgentCommand: []string{}, AgentEnv: map[string]string{}}, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(mcp, &c.MCP); err != nil {
		return c, fmt.Errorf("decode mcp_servers of %s: %w", group, err)
	}
	return c, nil
}

// writeConfig stores c; containerChange bumps the version and queues a
// restart (rebuild: a new image) for every active session of the group.
func writeConfig(ctx context.Context, tx pgx.Tx, group string, c GroupConfig, containerChange bool, reason string, rebuild bool) (GroupConfig, error) {
	mcp, err := json.Marshal(orEmpty(c.MCP))
	if err != nil {
		return c, fmt.Errorf("encode mcp servers: %w", err)
	}
	env := c.AgentEnv
	if env == nil {
		env = map[string]string{}
	}
	if _, err := tx.Exec(ctx, `UPDATE container_configs SET cli_scope = $2, cpus = $3, memory = $4,
		apt_packages = $5, npm_packages = $6, mcp_servers = $7, hold_approvals = $8, agent_command = $9, agent_env = $10,
		updated_at = now() WHERE agent_group_id = $1`,
		group, c.CLIScope, c.CPUs, c.Memory, orEmpty(c.Apt), orEmpty(c.Npm), mcp, c.HoldApprovals, orEmpty(c.AgentCommand), env); err != nil {
		return c, err
	}
	if containerChange {
		if c.Version, err = configChanged(ctx, tx, group, reason, rebuild); err != nil {
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
func (s *Service) GetGroupConfig(ctx context.Context, req *guardv1.GetGroupConfigRequest) (_ *guardv1.GetGroupConfigResponse, err error) {
	defer store.Faulted(&err, "group config")
	g, err := s.GetGroup(ctx, &guardv1.GetGroupRequest{Id: req.GetGroup()})
	if fault.KindOf(err) == fault.Invalid {
		return nil, invalid("group", "required")
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.GetGroupConfigResponse{Config: g.GetGroup().GetConfig()}, nil
}

// UpdateGroupConfig changes cli_scope and limits (unset = unchanged; an
// empty limit removes it). A limit change restarts the group's containers.
func (s *Service) UpdateGroupConfig(ctx context.Context, req *guardv1.UpdateGroupConfigRequest) (_ *guardv1.UpdateGroupConfigResponse, err error) {
	defer store.Faulted(&err, "group config")
	scope, err := checkUpdateGroupConfig(req)
	if err != nil {
		return nil, err
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *GroupConfig) (configChange, error) {
		limits := false
		if scope != "" {
			c.CLIScope = scope
		}
		if req.Cpus != nil && *req.Cpus != c.CPUs {
			c.CPUs, limits = *req.Cpus, true
		}
		if req.Memory != nil && *req.Memory != c.Memory {
			c.Memory, limits = *req.Memory, true
		}
		if req.HoldApprovals != nil {
			c.HoldApprovals = *req.HoldApprovals
		}
		agent := applyAgentSettings(c, req)
		reason := "resource limits changed"
		if agent {
			reason = "the agent's command or environment changed"
		}
		return configChange{container: limits || agent, reason: reason, rebuild: false}, nil
	})
	if err != nil {
		return nil, err
	}
	cfg, err := out.proto()
	if err != nil {
		return nil, err
	}
	var warn []string
	if req.HoldApprovals != nil {
		if warn, err = quorumWarnings(ctx, s.pool, *req.HoldApprovals, req.GetGroup(), "group "+req.GetGroup()+"'s hold approvals"); err != nil {
			return nil, err
		}
	}
	return &guardv1.UpdateGroupConfigResponse{Config: cfg, Warnings: warn}, nil
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
func (s *Service) changeConfig(ctx context.Context, group string, change func(c *GroupConfig) (configChange, error)) (GroupConfig, error) {
	var out GroupConfig
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		c, err := LockConfigTx(ctx, tx, group)
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

// SetPackagesTx sets a group's apt and npm packages (an approved
// install_packages, under LockConfigTx) and returns the config's new
// version.
func SetPackagesTx(ctx context.Context, tx pgx.Tx, group string, apt, npm []string) (int64, error) {
	var version int64
	err := tx.QueryRow(ctx, `UPDATE container_configs SET apt_packages = $2, npm_packages = $3, version = version + 1, updated_at = now()
		WHERE agent_group_id = $1 RETURNING version`, group, apt, npm).Scan(&version)
	if err != nil {
		return 0, fmt.Errorf("update the packages of %s: %w", group, err)
	}
	return version, nil
}

// SetMCPServersTx sets a group's MCP servers (an approved add_mcp_server,
// under LockConfigTx; servers is their JSON array) and returns the
// config's new version.
func SetMCPServersTx(ctx context.Context, tx pgx.Tx, group string, servers []byte) (int64, error) {
	var version int64
	err := tx.QueryRow(ctx, `UPDATE container_configs SET mcp_servers = $2, version = version + 1, updated_at = now()
		WHERE agent_group_id = $1 RETURNING version`, group, servers).Scan(&version)
	if err != nil {
		return 0, fmt.Errorf("update the MCP servers of %s: %w", group, err)
	}
	return version, nil
}

// GroupID is the id of the group ref names: ref itself when it is a
// group's id, else the id of the group named ref; "" when neither (the
// handler then refuses the reference as unknown).
func GroupID(ctx context.Context, q store.Querier, ref string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM agent_groups WHERE id = $1
		UNION ALL (SELECT id FROM agent_groups WHERE name = $1 LIMIT 1) LIMIT 1`, ref).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, store.Fault("group", err)
}
