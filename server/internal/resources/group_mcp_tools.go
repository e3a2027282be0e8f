package resources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// The operator's settings of a group's guarded MCP servers (migration
// 0250): an effect per tool and a default per server, each with its quorum
// and mode. mcp.call (package mcpcalls) reads them as facts; a change tells
// the group's sessions that their tool list changed. The tools a server
// lists are what its runners report (ReportMcpTools).

// mcpSettingRow is a server default or a tool setting as stored.
type mcpSettingRow struct {
	effect, mode string
	approvals    int32
}

func (r mcpSettingRow) setting() mcpcall.Setting {
	return mcpcall.Setting{Effect: r.effect, Approvals: int(r.approvals), Mode: r.mode}
}

// mcpSettingArgs checks an effect, quorum and mode of a request.
func mcpSettingArgs(effect guardv1.Effect, approvals int32, mode guardv1.EnforcementMode) (mcpSettingRow, error) {
	e, err := enumColumn("effect", effect)
	if err != nil {
		return mcpSettingRow{}, err
	}
	if err := validApprovals("approvals", approvals); err != nil {
		return mcpSettingRow{}, err
	}
	m, err := enumColumn("mode", mode)
	if err != nil {
		return mcpSettingRow{}, err
	}
	return mcpSettingRow{effect: e, approvals: approvals, mode: m}, nil
}

// lockMCPServer locks the group's config and checks it has the server: a
// setting of a server nobody hosts would silently do nothing.
func lockMCPServer(ctx context.Context, tx pgx.Tx, group, server string) (MCPServer, error) {
	c, err := LockConfigTx(ctx, tx, group)
	if err != nil {
		return MCPServer{}, err
	}
	i := slices.IndexFunc(c.MCP, func(m MCPServer) bool { return m.Name == server })
	if i < 0 {
		return MCPServer{}, notFound("group %q has no MCP server %q (ncl groups mcp list)", group, server)
	}
	return c.MCP[i], nil
}

// SetMcpServerDefault sets (or, with no effect, removes) a server's default
// for the tools nobody set.
func (s *Service) SetMcpServerDefault(ctx context.Context, req *guardv1.SetMcpServerDefaultRequest) (_ *guardv1.SetMcpServerDefaultResponse, err error) {
	defer store.Faulted(&err, "mcp server default")
	set, err := checkSetMcpServerDefault(req)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockMCPServer(ctx, tx, req.GetGroup(), req.GetServer()); err != nil {
			return err
		}
		if set.effect == "" {
			_, err = tx.Exec(ctx, `DELETE FROM mcp_server_settings WHERE agent_group_id = $1 AND server = $2`, req.GetGroup(), req.GetServer())
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO mcp_server_settings (agent_group_id, server, default_effect, approvals, mode) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (agent_group_id, server) DO UPDATE SET default_effect = EXCLUDED.default_effect,
					approvals = EXCLUDED.approvals, mode = EXCLUDED.mode, updated_at = now()`,
				req.GetGroup(), req.GetServer(), set.effect, set.approvals, set.mode)
		}
		if err != nil {
			return err
		}
		return toolsChangedTx(ctx, tx, req.GetGroup(), fmt.Sprintf("the default of MCP server %s changed", req.GetServer()))
	})
	if err != nil {
		return nil, err
	}
	servers, err := s.mcpServers(ctx, req.GetGroup(), req.GetServer())
	if err != nil || len(servers) == 0 {
		return nil, err
	}
	warn, err := quorumWarnings(ctx, s.pool, set.approvals, req.GetGroup(), "the default of MCP server "+req.GetServer())
	return &guardv1.SetMcpServerDefaultResponse{Server: servers[0], Warnings: warn}, err
}

// SetMcpTool sets (or, with no effect, removes) one tool's setting. A tool
// no runner has listed yet may be set ahead.
func (s *Service) SetMcpTool(ctx context.Context, req *guardv1.SetMcpToolRequest) (_ *guardv1.SetMcpToolResponse, err error) {
	defer store.Faulted(&err, "mcp tool")
	set, err := checkSetMcpTool(req)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockMCPServer(ctx, tx, req.GetGroup(), req.GetServer()); err != nil {
			return err
		}
		if set.effect == "" {
			_, err = tx.Exec(ctx, `DELETE FROM mcp_tool_settings WHERE agent_group_id = $1 AND server = $2 AND tool = $3`,
				req.GetGroup(), req.GetServer(), req.GetTool())
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO mcp_tool_settings (agent_group_id, server, tool, effect, approvals, mode) VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (agent_group_id, server, tool) DO UPDATE SET effect = EXCLUDED.effect,
					approvals = EXCLUDED.approvals, mode = EXCLUDED.mode, updated_at = now()`,
				req.GetGroup(), req.GetServer(), req.GetTool(), set.effect, set.approvals, set.mode)
		}
		if err != nil {
			return err
		}
		return toolsChangedTx(ctx, tx, req.GetGroup(), fmt.Sprintf("tool %s of MCP server %s changed", req.GetTool(), req.GetServer()))
	})
	if err != nil {
		return nil, err
	}
	tools, err := s.mcpTools(ctx, s.pool, req.GetGroup(), req.GetServer(), []string{req.GetTool()})
	if err != nil {
		return nil, err
	}
	warn, err := quorumWarnings(ctx, s.pool, set.approvals, req.GetGroup(), "MCP tool "+req.GetServer()+"."+req.GetTool())
	return &guardv1.SetMcpToolResponse{Tool: tools[0], Warnings: warn}, err
}

// toolsChangedTx tells every active session of the group that its tools
// changed: the runner's ListTools answers differently now.
func toolsChangedTx(ctx context.Context, tx pgx.Tx, group, why string) error {
	rows, err := tx.Query(ctx, `SELECT id FROM sessions WHERE agent_group_id = $1 AND status = 'active' ORDER BY created_at, id`, group)
	if err != nil {
		return fmt.Errorf("list active sessions of %s: %w", group, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list active sessions of %s: %w", group, err)
	}
	for _, id := range ids {
		if _, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
			Kind: guardv1.NoticeKind_NOTICE_KIND_TOOLS_CHANGED, Text: "Your MCP tools changed (" + why + "): list them again.",
		}}}); err != nil {
			return err
		}
	}
	return nil
}

// ListMcpServers lists a group's MCP servers with their defaults and states.
func (s *Service) ListMcpServers(ctx context.Context, req *guardv1.ListMcpServersRequest) (_ *guardv1.ListMcpServersResponse, err error) {
	defer store.Faulted(&err, "mcp servers")
	if err := s.visibleGroup(ctx, req.GetGroup()); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	filter := paging.Filter("mcp_servers", req.GetGroup())
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	after := ""
	if cur != nil {
		after = cur.ID
	}
	all, err := s.mcpServers(ctx, req.GetGroup(), "")
	if err != nil {
		return nil, err
	}
	out := &guardv1.ListMcpServersResponse{}
	for _, srv := range all {
		if srv.GetName() <= after {
			continue
		}
		if len(out.Servers) == limit {
			out.NextPageToken = paging.NextKey("", out.Servers[limit-1].GetName(), filter)
			break
		}
		out.Servers = append(out.Servers, srv)
	}
	return out, nil
}

// mcpServers reads a group's servers by name (only, when set), with their
// defaults and each runner's state. A config holds few servers: read whole.
func (s *Service) mcpServers(ctx context.Context, group, only string) ([]*guardv1.McpServerInfo, error) {
	c, err := readConfig(ctx, s.pool, group, false)
	if err != nil {
		return nil, err
	}
	defaults := map[string]mcpSettingRow{}
	rows, err := s.pool.Query(ctx, `SELECT server, default_effect, approvals, mode FROM mcp_server_settings WHERE agent_group_id = $1`, group)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var r mcpSettingRow
		if err := rows.Scan(&name, &r.effect, &r.approvals, &r.mode); err != nil {
			rows.Close()
			return nil, err
		}
		defaults[name] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	states := map[string][]*guardv1.McpServerState{}
	rows, err = s.pool.Query(ctx, `SELECT server, runner_id, state, error, tools, reported_at FROM mcp_server_states
		WHERE agent_group_id = $1 ORDER BY server, runner_id`, group)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var (
			name string
			at   time.Time
			st   guardv1.McpServerState
		)
		if err := rows.Scan(&name, &st.RunnerId, &st.State, &st.Error, &st.Tools, &at); err != nil {
			rows.Close()
			return nil, err
		}
		st.ReportedAt = ts(at)
		states[name] = append(states[name], &st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	mcp := slices.Clone(c.MCP)
	slices.SortFunc(mcp, func(a, b MCPServer) int { return cmpString(a.Name, b.Name) })
	var out []*guardv1.McpServerInfo
	for _, m := range mcp {
		if only != "" && m.Name != only {
			continue
		}
		d := defaults[m.Name]
		info := &guardv1.McpServerInfo{Group: group, Name: m.Name, Command: m.Command, Args: m.Args, Image: m.Image,
			Approvals: d.approvals, Runners: states[m.Name]}
		if info.DefaultEffect, err = enumFromColumn[guardv1.Effect]("default_effect", d.effect); err != nil {
			return nil, err
		}
		if info.Mode, err = enumFromColumn[guardv1.EnforcementMode]("mode", d.mode); err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ListMcpTools lists a server's tools — those its runners listed and those
// with a setting — with the effect a call gets and where it comes from.
func (s *Service) ListMcpTools(ctx context.Context, req *guardv1.ListMcpToolsRequest) (_ *guardv1.ListMcpToolsResponse, err error) {
	defer store.Faulted(&err, "mcp tools")
	if err := s.visibleGroup(ctx, req.GetGroup()); err != nil {
		return nil, err
	}
	if err := required("server", req.GetServer()); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	filter := paging.Filter("mcp_tools", req.GetGroup(), req.GetServer())
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	after := ""
	if cur != nil {
		after = cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT tool FROM mcp_server_tools WHERE agent_group_id = $1 AND server = $2 AND tool > $3
		UNION SELECT tool FROM mcp_tool_settings WHERE agent_group_id = $1 AND server = $2 AND tool > $3
		ORDER BY 1 LIMIT $4`, req.GetGroup(), req.GetServer(), after, limit+1)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := &guardv1.ListMcpToolsResponse{}
	if len(names) > limit {
		names = names[:limit]
		out.NextPageToken = paging.NextKey("", names[limit-1], filter)
	}
	if out.Tools, err = s.mcpTools(ctx, s.pool, req.GetGroup(), req.GetServer(), names); err != nil {
		return nil, err
	}
	return out, nil
}

// mcpTools resolves the named tools of a server, in the order named.
func (s *Service) mcpTools(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, group, server string, names []string) ([]*guardv1.McpToolInfo, error) {
	var def mcpSettingRow
	err := q.QueryRow(ctx, `SELECT default_effect, approvals, mode FROM mcp_server_settings WHERE agent_group_id = $1 AND server = $2`,
		group, server).Scan(&def.effect, &def.approvals, &def.mode)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	type toolRow struct {
		set      *mcpSettingRow
		desc     string
		lastSeen *time.Time
	}
	byName := map[string]*toolRow{}
	for _, n := range names {
		byName[n] = &toolRow{}
	}
	rows, err := q.Query(ctx, `SELECT t.tool, s.effect, s.approvals, s.mode, COALESCE(seen.description, ''), seen.last_seen
		FROM unnest($3::text[]) AS t(tool)
		LEFT JOIN mcp_tool_settings s ON s.agent_group_id = $1 AND s.server = $2 AND s.tool = t.tool
		LEFT JOIN mcp_server_tools seen ON seen.agent_group_id = $1 AND seen.server = $2 AND seen.tool = t.tool`,
		group, server, names)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var (
			name         string
			effect, mode *string
			approvals    *int32
			r            toolRow
		)
		if err := rows.Scan(&name, &effect, &approvals, &mode, &r.desc, &r.lastSeen); err != nil {
			rows.Close()
			return nil, err
		}
		if effect != nil {
			r.set = &mcpSettingRow{effect: *effect, approvals: *approvals, mode: *mode}
		}
		byName[name] = &r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]*guardv1.McpToolInfo, 0, len(names))
	for _, n := range names {
		r := byName[n]
		var tool mcpSettingRow
		if r.set != nil {
			tool = *r.set
		}
		eff := mcpcall.Resolve(tool.setting(), def.setting())
		info := &guardv1.McpToolInfo{Group: group, Server: server, Tool: n, Description: r.desc, Approvals: int32(eff.Approvals),
			Source: map[string]guardv1.McpEffectSource{
				mcpcall.FromTool:          guardv1.McpEffectSource_MCP_EFFECT_SOURCE_TOOL,
				mcpcall.FromServerDefault: guardv1.McpEffectSource_MCP_EFFECT_SOURCE_SERVER_DEFAULT,
				mcpcall.FromBuiltIn:       guardv1.McpEffectSource_MCP_EFFECT_SOURCE_BUILT_IN,
			}[eff.Source]}
		if r.lastSeen != nil {
			info.LastSeen = ts(*r.lastSeen)
		}
		if info.Effect, err = enumFromColumn[guardv1.Effect]("effect", eff.Effect); err != nil {
			return nil, err
		}
		if info.ToolEffect, err = enumFromColumn[guardv1.Effect]("effect", tool.effect); err != nil {
			return nil, err
		}
		if info.Mode, err = enumFromColumn[guardv1.EnforcementMode]("mode", eff.Mode); err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// ReportMcpTools records what the runner hosting a session's server sees —
// its state and its tools — and answers each tool's effect for the
// session's group. The session must be placed on the calling runner.
func (s *Service) ReportMcpTools(ctx context.Context, runnerID string, req *guardv1.ReportMcpToolsRequest) (_ *guardv1.ReportMcpToolsResponse, err error) {
	defer store.Faulted(&err, "mcp tools report")
	if err := required("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if !mcpcall.ValidServer(req.GetServer()) {
		return nil, invalid("server", "%q is not an MCP server name", req.GetServer())
	}
	names := make([]string, 0, len(req.GetTools()))
	for i, t := range req.GetTools() {
		if !mcpcall.ValidTool(t.GetName()) {
			return nil, invalid(fmt.Sprintf("tools[%d].name", i), "%q is not a tool name", t.GetName())
		}
		names = append(names, t.GetName())
	}
	var group string
	out := &guardv1.ReportMcpToolsResponse{}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var owner string
		err := tx.QueryRow(ctx, `SELECT agent_group_id, COALESCE(runner_id, '') FROM sessions WHERE id = $1`, req.GetSessionId()).Scan(&group, &owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
			return fault.Deniedf("runner %q does not host session %q", runnerID, req.GetSessionId())
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO mcp_server_states (agent_group_id, server, runner_id, state, error, tools) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (agent_group_id, server, runner_id) DO UPDATE SET state = EXCLUDED.state, error = EXCLUDED.error,
				tools = EXCLUDED.tools, reported_at = now()`,
			group, req.GetServer(), runnerID, req.GetState(), req.GetError(), len(names)); err != nil {
			return err
		}
		if req.GetState() == "running" && len(names) > 0 {
			descs := make([]string, len(names))
			for i, t := range req.GetTools() {
				descs[i] = t.GetDescription()
			}
			if _, err := tx.Exec(ctx, `INSERT INTO mcp_server_tools (agent_group_id, server, tool, description)
				SELECT $1, $2, t.name, t.description FROM unnest($3::text[], $4::text[]) AS t(name, description)
				ON CONFLICT (agent_group_id, server, tool) DO UPDATE SET description = EXCLUDED.description, last_seen = now()`,
				group, req.GetServer(), names, descs); err != nil {
				return err
			}
		}
		out.Tools, err = s.mcpTools(ctx, tx, group, req.GetServer(), names)
		return err
	})
	return out, err
}
