package resources_test

import (
	"context"
	"maps"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
)

func TestGroupRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry

	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "alpha", BaseImage: "img:1"})).GetGroup()
	if g.GetId()[:3] != "ag_" || g.GetConfig().GetCliScope() != guardv1.CliScope_CLI_SCOPE_GROUP || g.GetConfig().GetVersion() != 1 {
		t.Fatalf("created %v", g)
	}
	got := must[*guardv1.GetGroupResponse](t)(r.GetGroup(ctx, &guardv1.GetGroupRequest{Id: g.GetId()})).GetGroup()
	if !proto.Equal(got, g) {
		t.Fatalf("get %v != create %v", got, g)
	}
	must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "beta", CliScope: guardv1.CliScope_CLI_SCOPE_GLOBAL}))
	list := must[*guardv1.ListGroupsResponse](t)(r.ListGroups(ctx, &guardv1.ListGroupsRequest{})).GetGroups()
	if len(list) != 2 || list[0].GetName() != "alpha" || list[1].GetConfig().GetCliScope() != guardv1.CliScope_CLI_SCOPE_GLOBAL {
		t.Fatalf("list %v", list)
	}
	pin := "host-a"
	up := must[*guardv1.UpdateGroupResponse](t)(r.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: g.GetId(), Name: "alpha2", PinnedHost: &pin})).GetGroup()
	if up.GetName() != "alpha2" || up.GetPinnedHost() != "host-a" || up.GetBaseImage() != "img:1" {
		t.Fatalf("update %v", up)
	}
	_, err := r.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: g.GetId(), Name: "beta"})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = r.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: g.GetId(), BaseImage: "img; rm -rf /"})
	wantCode(t, err, codes.InvalidArgument, "base_image")
	_, err = r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "gamma", PinnedHost: "a b"})
	wantCode(t, err, codes.InvalidArgument, "pinned_host")
	// A new base image is a container change: version bump and a rebuild push.
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id) VALUES ('s1', $1)`, g.GetId())
	up = must[*guardv1.UpdateGroupResponse](t)(r.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: g.GetId(), BaseImage: "img:2"})).GetGroup()
	if up.GetBaseImage() != "img:2" || up.GetConfig().GetVersion() != 2 || up.GetName() != "alpha2" {
		t.Fatalf("update %v", up)
	}
	if n := count(t, srv, `SELECT count(*) FROM runner_pushes WHERE session_id = 's1' AND kind = 'restart'`); n != 1 {
		t.Fatalf("%d restart pushes after a base image change", n)
	}
	del := must[*guardv1.DeleteGroupResponse](t)(r.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{Id: g.GetId()}))
	if del.GetRemoved()["container_configs"] != 1 || del.GetRemoved()["sessions"] != 1 {
		t.Fatalf("removed %v", del.GetRemoved())
	}
	_, err = r.GetGroup(ctx, &guardv1.GetGroupRequest{Id: g.GetId()})
	wantCode(t, err, codes.NotFound, "")

	// Bad input.
	_, err = r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "beta"})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = r.CreateGroup(ctx, &guardv1.CreateGroupRequest{})
	wantCode(t, err, codes.InvalidArgument, "name")
	_, err = r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "x", CliScope: 42})
	wantCode(t, err, codes.InvalidArgument, "cli_scope")
	_, err = r.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: "ag_nope", Name: "y"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{Id: "ag_nope"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{})
	wantCode(t, err, codes.InvalidArgument, "id")
}

// The seed's groups.test.ts: deleting a group removes exactly its dependent
// rows, counted per table, and nothing of another group.
func TestGroupDeleteCascade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	g := must[*guardv1.CreateGroupResponse](t)(c.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "doomed"})).GetGroup().GetId()
	h := must[*guardv1.CreateGroupResponse](t)(c.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "other"})).GetGroup().GetId()

	exec(t, srv, `INSERT INTO users (id) VALUES ('tg:dana')`)
	exec(t, srv, `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('mg_1', 'telegram', '-100')`)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id, messaging_group_id) VALUES ('sess_g', $1, 'mg_1'), ('sess_h', $2, NULL)`, g, h)
	exec(t, srv, `INSERT INTO pending_questions (id, session_id, agent_group_id, question) VALUES ('q1', 'sess_g', $1, 'why?')`, g)
	// A session hold and a sessionless group-anchored sender-admission hold.
	exec(t, srv, `INSERT INTO holds (id, kind, session_id, agent_group_id) VALUES ('pa-1', 'cli_command', 'sess_g', $1)`, g)
	exec(t, srv, `INSERT INTO holds (id, kind, agent_group_id, dedup_key) VALUES ('pa-2', 'sender_admit', $1, 'sender_admit:mg:tg:99')`, g)
	exec(t, srv, `INSERT INTO holds (id, kind, session_id, agent_group_id) VALUES ('pa-h', 'cli_command', 'sess_h', $1)`, h)
	exec(t, srv, `INSERT INTO agent_destinations (agent_group_id, name, target_messaging_group_id) VALUES ($1, 'chat', 'mg_1')`, g)
	exec(t, srv, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ($1, 'doomed', $2)`, h, g)
	exec(t, srv, `INSERT INTO agent_destinations (agent_group_id, name, target_messaging_group_id) VALUES ($1, 'chat', 'mg_1')`, h)
	exec(t, srv, `INSERT INTO pending_channel_registrations (messaging_group_id, agent_group_id) VALUES ('mg_1', $1)`, g)
	exec(t, srv, `INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('wr_1', 'mg_1', $1), ('wr_2', 'mg_1', $2)`, g, h)
	exec(t, srv, `INSERT INTO agent_group_members (agent_group_id, user_id) VALUES ($1, 'tg:dana'), ($2, 'tg:dana')`, g, h)
	exec(t, srv, `INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('tg:dana', 'admin', $1), ('tg:dana', 'admin', NULL)`, g)
	exec(t, srv, `INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ($1, $2, 'tg:dana'), ($2, $1, 'tg:dana')`, g, h)

	del := must[*guardv1.DeleteGroupResponse](t)(c.Registry.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{Id: g}))
	want := map[string]int64{
		"sessions":                      1,
		"pending_questions":             1,
		"holds":                         2,
		"agent_destinations_owned":      1,
		"agent_destinations_pointing":   1,
		"pending_channel_registrations": 1,
		"messaging_group_agents":        1,
		"agent_group_members":           1,
		"user_roles":                    1,
		"container_configs":             1,
		"agent_message_policies":        2,
	}
	if !maps.Equal(del.GetRemoved(), want) {
		t.Fatalf("removed %v, want %v", del.GetRemoved(), want)
	}
	for _, q := range []string{
		`SELECT count(*) FROM agent_groups WHERE id = $1`,
		`SELECT count(*) FROM sessions WHERE agent_group_id = $1`,
		`SELECT count(*) FROM holds WHERE agent_group_id = $1 OR session_id = 'sess_g'`,
		`SELECT count(*) FROM agent_destinations WHERE agent_group_id = $1 OR target_agent_group_id = $1`,
		`SELECT count(*) FROM container_configs WHERE agent_group_id = $1`,
		`SELECT count(*) FROM agent_message_policies WHERE from_agent_group_id = $1 OR to_agent_group_id = $1`,
	} {
		if n := count(t, srv, q, g); n != 0 {
			t.Errorf("%s: %d rows left", q, n)
		}
	}
	// The other group, the user, its global grant and the chat survive.
	for q, n := range map[string]int{
		`SELECT count(*) FROM sessions WHERE agent_group_id = $1`:                         1,
		`SELECT count(*) FROM holds WHERE agent_group_id = $1`:                            1,
		`SELECT count(*) FROM agent_destinations WHERE agent_group_id = $1`:               1,
		`SELECT count(*) FROM messaging_group_agents WHERE agent_group_id = $1`:           1,
		`SELECT count(*) FROM agent_group_members WHERE agent_group_id = $1`:              1,
		`SELECT count(*) FROM container_configs WHERE agent_group_id = $1`:                1,
		`SELECT count(*) FROM user_roles WHERE agent_group_id IS NULL AND $1::text <> ''`: 1,
		`SELECT count(*) FROM messaging_groups WHERE id = 'mg_1' AND $1::text <> ''`:      1,
	} {
		if got := count(t, srv, q, h); got != n {
			t.Errorf("%s: %d rows, want %d", q, got, n)
		}
	}
}

func TestGroupConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "cfg"})).GetGroup().GetId()
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id) VALUES ('s_active', $1)`, g)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id, status) VALUES ('s_stopped', $1, 'stopped')`, g)
	restarts := func() (n int, rebuilds int) {
		n = count(t, srv, `SELECT count(*) FROM runner_pushes WHERE kind = 'restart' AND session_id = 's_active'`)
		var total int
		total = count(t, srv, `SELECT count(*) FROM runner_pushes WHERE kind = 'restart'`)
		if total != n {
			t.Fatalf("restart pushed to a stopped session")
		}
		rows, err := srv.Pool.Query(ctx, `SELECT body FROM runner_pushes WHERE kind = 'restart'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			var p guardv1.Push
			if err := proto.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			if p.GetRestart().GetRebuildImage() {
				rebuilds++
			}
		}
		return n, rebuilds
	}

	// cli_scope alone does not touch the container.
	cfg := must[*guardv1.UpdateGroupConfigResponse](t)(r.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, CliScope: guardv1.CliScope_CLI_SCOPE_DISABLED})).GetConfig()
	if cfg.GetCliScope() != guardv1.CliScope_CLI_SCOPE_DISABLED || cfg.GetVersion() != 1 {
		t.Fatalf("config %v", cfg)
	}
	if n, _ := restarts(); n != 0 {
		t.Fatalf("%d restarts after cli_scope change", n)
	}
	// Limits restart without a rebuild.
	cpus, mem := "1.5", "512m"
	cfg = must[*guardv1.UpdateGroupConfigResponse](t)(r.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, Cpus: &cpus, Memory: &mem})).GetConfig()
	if cfg.GetCpus() != "1.5" || cfg.GetMemory() != "512m" || cfg.GetVersion() != 2 {
		t.Fatalf("config %v", cfg)
	}
	if n, rb := restarts(); n != 1 || rb != 0 {
		t.Fatalf("restarts %d rebuilds %d", n, rb)
	}
	// Packages rebuild.
	cfg = must[*guardv1.AddGroupPackageResponse](t)(r.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Packages: []string{"curl", "libc6-dev", "curl"}})).GetConfig()
	if len(cfg.GetAptPackages()) != 2 || cfg.GetVersion() != 3 {
		t.Fatalf("config %v", cfg)
	}
	cfg = must[*guardv1.AddGroupPackageResponse](t)(r.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_NPM, Packages: []string{"@scope/pkg", "left-pad"}})).GetConfig()
	if len(cfg.GetNpmPackages()) != 2 || cfg.GetVersion() != 4 {
		t.Fatalf("config %v", cfg)
	}
	cfg = must[*guardv1.RemoveGroupPackageResponse](t)(r.RemoveGroupPackage(ctx, &guardv1.RemoveGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Package: "curl"})).GetConfig()
	if len(cfg.GetAptPackages()) != 1 || cfg.GetAptPackages()[0] != "libc6-dev" {
		t.Fatalf("config %v", cfg)
	}
	if n, rb := restarts(); n != 4 || rb != 3 {
		t.Fatalf("restarts %d rebuilds %d", n, rb)
	}
	// MCP servers.
	srvDef := &guardv1.McpServer{Name: "files", Command: "mcp-files", Args: []string{"--root", "/data"}, Env: map[string]string{"A": "b"}}
	cfg = must[*guardv1.AddGroupMcpServerResponse](t)(r.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: g, Server: srvDef})).GetConfig()
	if len(cfg.GetMcpServers()) != 1 || !proto.Equal(cfg.GetMcpServers()[0], secret.Redact(srvDef)) {
		t.Fatalf("config %v", cfg)
	}
	_, err := r.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: g, Server: srvDef})
	wantCode(t, err, codes.AlreadyExists, "")
	got := must[*guardv1.GetGroupConfigResponse](t)(r.GetGroupConfig(ctx, &guardv1.GetGroupConfigRequest{Group: g})).GetConfig()
	if !proto.Equal(got, cfg) {
		t.Fatalf("get %v != %v", got, cfg)
	}
	cfg = must[*guardv1.RemoveGroupMcpServerResponse](t)(r.RemoveGroupMcpServer(ctx, &guardv1.RemoveGroupMcpServerRequest{Group: g, Name: "files"})).GetConfig()
	if len(cfg.GetMcpServers()) != 0 || cfg.GetVersion() != 7 {
		t.Fatalf("config %v", cfg)
	}
	// Restart.
	rs := must[*guardv1.RestartGroupResponse](t)(r.RestartGroup(ctx, &guardv1.RestartGroupRequest{Group: g, RebuildImage: true}))
	if rs.GetSessions() != 1 {
		t.Fatalf("restart %v", rs)
	}
	if n, rb := restarts(); n != 7 || rb != 4 {
		t.Fatalf("restarts %d rebuilds %d", n, rb)
	}

	// Bad input names the field.
	for _, tc := range []struct {
		err   error
		code  codes.Code
		field string
	}{
		{second(r.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Packages: []string{"curl; rm -rf /"}})), codes.InvalidArgument, "packages"},
		{second(r.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_NPM, Packages: []string{"Bad"}})), codes.InvalidArgument, "packages"},
		{second(r.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: g, Packages: []string{"curl"}})), codes.InvalidArgument, "manager"},
		{second(r.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT})), codes.InvalidArgument, "packages"},
		{second(r.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: "ag_nope", Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Packages: []string{"curl"}})), codes.NotFound, ""},
		{second(r.RemoveGroupPackage(ctx, &guardv1.RemoveGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Package: "nope"})), codes.NotFound, ""},
		{second(r.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: g, Server: &guardv1.McpServer{Name: "x"}})), codes.InvalidArgument, "server.command"},
		{second(r.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: g})), codes.InvalidArgument, "server"},
		{second(r.RemoveGroupMcpServer(ctx, &guardv1.RemoveGroupMcpServerRequest{Group: g, Name: "nope"})), codes.NotFound, ""},
		{second(r.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, Cpus: ptr("lots")})), codes.InvalidArgument, "cpus"},
		{second(r.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, Memory: ptr("1 TB")})), codes.InvalidArgument, "memory"},
		{second(r.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, CliScope: 9})), codes.InvalidArgument, "cli_scope"},
		{second(r.GetGroupConfig(ctx, &guardv1.GetGroupConfigRequest{})), codes.InvalidArgument, "group"},
		{second(r.RestartGroup(ctx, &guardv1.RestartGroupRequest{Group: "ag_nope"})), codes.NotFound, ""},
	} {
		wantCode(t, tc.err, tc.code, tc.field)
	}
}

func second[T any](_ T, err error) error { return err }

func ptr[T any](v T) *T { return &v }
