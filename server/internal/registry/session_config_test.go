package registry_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A runner reads the config of the sessions it hosts whatever the agent's
// cli_scope: with cli_scope = disabled the agent's own GetGroup is refused,
// yet OpenSession and GetSessionConfig carry the limits, packages and MCP
// servers. Any other caller learns nothing, not even whether a session exists.
func TestSessionConfigIsTheHostingRunnersOnly(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	g := group(t, srv, "locked", "")
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO container_configs (agent_group_id, cli_scope, cpus, memory, apt_packages, mcp_servers, version)
		VALUES ($1, 'disabled', '0.5', '256m', '{jq}', '[{"name":"fs","command":"mcp-fs","args":["/workspace"]}]', 3)`, g); err != nil {
		t.Fatal(err)
	}
	a := newRunner(t, srv, "runner-a", "h1", nil)
	a.mustRegister(t)
	opened, err := a.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: g})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	sess := opened.GetSession()
	checkConfig := func(what string, got *guardv1.Group, memory string, version int64) {
		t.Helper()
		c := got.GetConfig()
		if got.GetId() != g || c.GetCliScope() != guardv1.CliScope_CLI_SCOPE_DISABLED || c.GetCpus() != "0.5" || c.GetMemory() != memory ||
			c.GetVersion() != version || len(c.GetAptPackages()) != 1 || c.GetAptPackages()[0] != "jq" ||
			len(c.GetMcpServers()) != 1 || c.GetMcpServers()[0].GetCommand() != "mcp-fs" || c.GetMcpServers()[0].GetArgs()[0] != "/workspace" {
			t.Fatalf("%s: group = %v, want %s disabled, cpus 0.5, memory %s, version %d, apt jq, mcp fs", what, got, g, memory, version)
		}
	}
	checkConfig("OpenSession", opened.GetGroup(), "256m", 3)

	// The premise: as the agent, the runner may not read the group.
	asAgent := testserver.ClientsFor(srv.Conn(t, a.token, sess.GetId()))
	if _, err := asAgent.Registry.GetGroup(ctxT(t), &guardv1.GetGroupRequest{Id: g}); err == nil {
		t.Fatal("GetGroup as the agent of a cli_scope=disabled group succeeded; the test's premise is gone")
	}

	got, err := a.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: sess.GetId()})
	if err != nil {
		t.Fatalf("owner reads its session's config: %v", err)
	}
	if got.GetSession().GetId() != sess.GetId() || got.GetSession().GetRunnerId() != a.id {
		t.Fatalf("session = %v, want %s on %s", got.GetSession(), sess.GetId(), a.id)
	}
	checkConfig("GetSessionConfig", got.GetGroup(), "256m", 3)

	// It is the current config, not the one at open time.
	if _, err := srv.Pool.Exec(ctxT(t), `UPDATE container_configs SET memory = '512m', version = 4 WHERE agent_group_id = $1`, g); err != nil {
		t.Fatal(err)
	}
	got, err = a.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: sess.GetId()})
	if err != nil {
		t.Fatalf("owner re-reads: %v", err)
	}
	checkConfig("GetSessionConfig after a change", got.GetGroup(), "512m", 4)

	// Another runner: denied, and an unknown session reads exactly the same.
	b := newRunner(t, srv, "runner-b", "h2", nil)
	b.mustRegister(t)
	_, foreign := b.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: sess.GetId()})
	const unknown = "sess_00000000000000000000"
	_, missing := b.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: unknown})
	if status.Code(foreign) != codes.PermissionDenied || status.Code(missing) != codes.PermissionDenied {
		t.Fatalf("other runner: foreign session %v, unknown session %v; want PermissionDenied for both", foreign, missing)
	}
	fm := strings.ReplaceAll(status.Convert(foreign).Message(), sess.GetId(), "<id>")
	mm := strings.ReplaceAll(status.Convert(missing).Message(), unknown, "<id>")
	if fm != mm || strings.Contains(fm, g) {
		t.Fatalf("foreign %q vs unknown %q: the messages must match (no existence oracle) and name no group", fm, mm)
	}

	// Only runners call it at all; a session id is required.
	op := srv.Operator(t)
	if _, err := op.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: sess.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("operator: %v, want PermissionDenied", err)
	}
	if _, err := a.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no session id: %v, want InvalidArgument", err)
	}
}
