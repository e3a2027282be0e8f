package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// SessionConfig is the session and its group's current container config,
// read for the runner that hosts the session. It is infrastructure (what the
// runner needs to start the agent), so unlike GetGroup it does not pass
// through the agent's cli_scope. A session the runner does not host reads as
// PermissionDenied with the same message whether or not it exists, so the
// answer is no oracle for other runners' session ids.
func (s *Service) SessionConfig(ctx context.Context, runnerID, sessionID string) (*guardv1.GetSessionConfigResponse, error) {
	if sessionID == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id: required")
	}
	var out *guardv1.GetSessionConfigResponse
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var owner string
		err := tx.QueryRow(ctx, `SELECT COALESCE(runner_id, '') FROM sessions WHERE id = $1`, sessionID).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
			return notHostedError(runnerID, sessionID)
		}
		if err != nil {
			return fmt.Errorf("read session owner: %w", err)
		}
		sess, err := readSessionTx(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		g, err := readGroupTx(ctx, tx, sess.GetAgentGroupId())
		if err != nil {
			return err
		}
		out = &guardv1.GetSessionConfigResponse{Session: sess, Group: g}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func notHostedError(runnerID, sessionID string) error {
	return status.Errorf(codes.PermissionDenied, "session %q is not hosted by runner %q", sessionID, runnerID)
}

// readGroupTx reads a group with its container config; a group without a
// container_configs row reads as the defaults (as resources.GetGroup does).
func readGroupTx(ctx context.Context, tx pgx.Tx, groupID string) (*guardv1.Group, error) {
	var (
		g       guardv1.Group
		c       guardv1.GroupConfig
		created time.Time
		scope   string
		mcp     []byte
	)
	err := tx.QueryRow(ctx, `
		SELECT g.id, g.name, g.base_image, g.pinned_host, g.created_at,
		       COALESCE(c.cli_scope, 'group'), COALESCE(c.cpus, ''), COALESCE(c.memory, ''),
		       COALESCE(c.apt_packages, '{}'), COALESCE(c.npm_packages, '{}'), COALESCE(c.mcp_servers, '[]'), COALESCE(c.version, 0)
		FROM agent_groups g LEFT JOIN container_configs c ON c.agent_group_id = g.id
		WHERE g.id = $1`, groupID).Scan(&g.Id, &g.Name, &g.BaseImage, &g.PinnedHost, &created,
		&scope, &c.Cpus, &c.Memory, &c.AptPackages, &c.NpmPackages, &mcp, &c.Version)
	if err != nil {
		return nil, fmt.Errorf("read group %s: %w", groupID, err)
	}
	var servers []struct {
		Name    string            `json:"name"`
		Command string            `json:"command"`
		Args    []string          `json:"args,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
	}
	if err := json.Unmarshal(mcp, &servers); err != nil {
		return nil, fmt.Errorf("decode mcp_servers of %s: %w", groupID, err)
	}
	for _, m := range servers {
		c.McpServers = append(c.McpServers, &guardv1.McpServer{Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env})
	}
	switch scope {
	case "disabled":
		c.CliScope = guardv1.CliScope_CLI_SCOPE_DISABLED
	case "global":
		c.CliScope = guardv1.CliScope_CLI_SCOPE_GLOBAL
	default:
		c.CliScope = guardv1.CliScope_CLI_SCOPE_GROUP
	}
	g.CreatedAt, g.Config = timestamppb.New(created), &c
	return &g, nil
}
