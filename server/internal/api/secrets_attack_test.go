package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// The MCP server secrets of the attacks of issue 41 (items 1, 2 and 12):
// an admin's and an agent's.
const (
	adminSecret = "ghp_admin_set_0123456789abcdef"
	agentSecret = "sk_agent_asked_fedcba9876543210"
)

// secretsWorld: group A (cli_scope group) whose MCP server "gh" an admin
// gave GITHUB_TOKEN, group G (cli_scope global), both with a session on
// runner r1; an owner.
type secretsWorld struct {
	srv                *testserver.Server
	agentA, agentG, r1 testserver.Clients
	operator, owner    testserver.Clients
	bridge             testserver.Clients
}

func newSecretsWorld(t *testing.T) *secretsWorld {
	t.Helper()
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('gA', 'alpha'), ('gG', 'global')`,
		`INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('gA', 'group'), ('gG', 'global')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('sA', 'gA', 'r1'), ('sG', 'gG', 'r1')`,
		`INSERT INTO users (id) VALUES ('telegram:olivia')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('telegram:olivia', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	runner := srv.Token(t, "runner", "r1", "")
	w := &secretsWorld{
		srv: srv, operator: srv.Operator(t),
		agentA: testserver.ClientsFor(srv.Conn(t, runner, "sA")),
		agentG: testserver.ClientsFor(srv.Conn(t, runner, "sG")),
		r1:     testserver.ClientsFor(srv.Conn(t, runner, "")),
		owner:  testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "telegram:olivia"), "")),
		bridge: testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), "")),
	}
	_, err := w.operator.Registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: "gA",
		Server: &guardv1.McpServer{Name: "gh", Command: "gh-mcp", Env: map[string]string{"GITHUB_TOKEN": adminSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// clear fails when an answer carries a secret in clear; the names of the
// keys must still be there.
func clear(t *testing.T, what string, m proto.Message, err error, keys ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b, _ := protojson.Marshal(m)
	for _, s := range []string{adminSecret, agentSecret} {
		if strings.Contains(string(b), s) {
			t.Errorf("%s carries a secret in clear: %s", what, b)
		}
	}
	for _, k := range keys {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s does not name the key %s: %s", what, k, b)
		}
	}
}

func TestNoReadOfAGroupGivesItsMCPSecrets(t *testing.T) {
	w := newSecretsWorld(t)
	ctx := context.Background()
	// Item 1: the agent of the group itself, under the default cli_scope.
	g, err := w.agentA.Registry.GetGroup(ctx, &guardv1.GetGroupRequest{Id: "gA"})
	clear(t, "A's agent: GetGroup(A)", g, err, "GITHUB_TOKEN")
	c, err := w.agentA.Registry.GetGroupConfig(ctx, &guardv1.GetGroupConfigRequest{Group: "gA"})
	clear(t, "A's agent: GetGroupConfig(A)", c, err, "GITHUB_TOKEN")
	l, err := w.agentA.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{})
	clear(t, "A's agent: ListGroups", l, err, "GITHUB_TOKEN")
	// A global agent, the operator (ncl export) and an owner alike.
	for who, cl := range map[string]testserver.Clients{"G's global agent": w.agentG, "operator": w.operator, "owner": w.owner} {
		l, err := cl.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{})
		clear(t, who+": ListGroups", l, err, "GITHUB_TOKEN")
		g, err := cl.Registry.GetGroup(ctx, &guardv1.GetGroupRequest{Id: "gA"})
		clear(t, who+": GetGroup(A)", g, err, "GITHUB_TOKEN")
	}
	// An answer that writes the config answers it redacted.
	add, err := w.operator.Registry.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: "gA", Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Packages: []string{"jq"}})
	clear(t, "operator: AddGroupPackage's config", add, err, "GITHUB_TOKEN")
	// The runner opening a session gets no secret; only its own config read
	// does — never for an agent it speaks for.
	o, err := w.r1.Registry.OpenSession(ctx, &guardv1.OpenSessionRequest{AgentGroupId: "gA"})
	clear(t, "runner: OpenSession", o, err, "GITHUB_TOKEN")
	sc, err := w.agentA.Registry.GetSessionConfig(ctx, &guardv1.GetSessionConfigRequest{SessionId: "sA"})
	if err == nil {
		clear(t, "runner as A's agent: GetSessionConfig", sc, err, "GITHUB_TOKEN")
	}
	sc, err = w.r1.Registry.GetSessionConfig(ctx, &guardv1.GetSessionConfigRequest{SessionId: "sA"})
	if err != nil || sc.GetGroup().GetConfig().GetMcpServers()[0].GetEnv()["GITHUB_TOKEN"] != adminSecret {
		t.Fatalf("the hosting runner's own config read: %v %v, want the secret (it starts the server)", sc, err)
	}
}

// heldMCPServer has A's agent ask, as its runner does, for an MCP server
// with a secret, on a card that (as an older runner's did) spells the env
// out; the hold is approved.
func heldMCPServer(t *testing.T, w *secretsWorld, standing bool) string {
	t.Helper()
	ctx := context.Background()
	payload, _ := structpb.NewStruct(map[string]any{"name": "db", "command": "db-mcp", "env": map[string]any{"DB_PASSWORD": agentSecret}})
	d, err := w.agentA.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "self_mod.add_mcp_server", Payload: payload, Card: &guardv1.HoldCard{
		Title: "Add MCP server", Question: "Agent group gA wants db-mcp. Environment: DB_PASSWORD=" + agentSecret, DeliveryAction: "add_mcp_server"}})
	if err != nil || d.GetHoldId() == "" {
		t.Fatalf("add_mcp_server: %v %v, want a hold", d, err)
	}
	req := &guardv1.ResolveRequest{Id: d.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}
	if standing {
		req.StandingFor = durationpb.New(time.Hour)
	}
	r, err := w.owner.Approvals.Resolve(ctx, req)
	clear(t, "owner: Resolve", r, err, "DB_PASSWORD")
	return d.GetHoldId()
}

func TestNoHoldViewGivesAnMCPSecret(t *testing.T) {
	w := newSecretsWorld(t)
	ctx := context.Background()
	hold := heldMCPServer(t, w, true)

	// Item 2: G's global agent on the same runner sees nothing of A's hold.
	if _, err := w.agentG.Approvals.Get(ctx, &guardv1.GetRequest{Id: hold}); status.Code(err) != codes.NotFound {
		t.Errorf("G's agent: Approvals.Get of A's hold: %v, want NotFound", err)
	}
	l, err := w.agentG.Approvals.List(ctx, &guardv1.ListRequest{})
	if err != nil || len(l.GetHolds()) != 0 {
		t.Errorf("G's agent: Approvals.List: %v %v, want none of A's holds", l, err)
	}
	// Whoever sees the hold sees its secrets redacted, its card scrubbed.
	for who, cl := range map[string]testserver.Clients{"operator": w.operator, "owner": w.owner, "bridge": w.bridge} {
		g, err := cl.Approvals.Get(ctx, &guardv1.GetRequest{Id: hold})
		clear(t, who+": Approvals.Get", g, err, "DB_PASSWORD")
		l, err := cl.Approvals.List(ctx, &guardv1.ListRequest{})
		clear(t, who+": Approvals.List", l, err, "DB_PASSWORD")
	}
	grants, err := w.owner.Approvals.ListStandingGrants(ctx, &guardv1.ListStandingGrantsRequest{IncludeEnded: true})
	if len(grants.GetGrants()) == 0 {
		t.Fatalf("no standing grant was made: %v", err)
	}
	clear(t, "owner: ListStandingGrants", grants, err, "DB_PASSWORD")
	// Watch (bridges' cards) replays the hold's events redacted.
	stream, err := w.bridge.Approvals.Watch(ctx, &guardv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // requested, resolved
		ev, err := stream.Recv()
		clear(t, "bridge: Watch", ev, err, "DB_PASSWORD")
	}
	// The webhook posts the same event.
	body, err := approvals.WebhookBody(&guardv1.WatchResponse{Hold: &guardv1.Hold{Kind: "add_mcp_server",
		Payload: must(structpb.NewStruct(map[string]any{"env": map[string]any{"DB_PASSWORD": agentSecret}}))}})
	if err != nil || strings.Contains(string(body), agentSecret) || !strings.Contains(string(body), secret.Redacted) {
		t.Errorf("webhook body %s (%v): want the secret redacted", body, err)
	}
}

func TestAnAgentsAdminCommandShowsItsSecretsToNobody(t *testing.T) {
	w := newSecretsWorld(t)
	ctx := context.Background()
	_, err := w.agentA.Registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Server: &guardv1.McpServer{
		Name: "db", Command: "db-mcp", Env: map[string]string{"DB_PASSWORD": agentSecret}}})
	hold := pendingHold(t, err)
	var question string
	if err := w.srv.Pool.QueryRow(ctx, `SELECT question FROM holds WHERE id = $1`, hold).Scan(&question); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(question, agentSecret) || !strings.Contains(question, "DB_PASSWORD") {
		t.Errorf("the command card's question shows %q: want the key, not the value", question)
	}
	g, err := w.owner.Approvals.Get(ctx, &guardv1.GetRequest{Id: hold})
	clear(t, "owner: Approvals.Get of the command hold", g, err, "DB_PASSWORD")
	if _, err := w.operator.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:olivia"}); err != nil {
		t.Fatal(err)
	}
	// The replay ran: its RESULT notice (the new config, every server's
	// env in it) reaches the agent redacted.
	var notice *guardv1.NotifyAgent
	testserver.Eventually(t, 10*time.Second, "the replay's RESULT notice", func() bool {
		rows, err := w.srv.Pool.Query(ctx, `SELECT body FROM runner_pushes WHERE session_id = 'sA' AND kind = 'notify'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			var p guardv1.Push
			if rows.Scan(&b) == nil && proto.Unmarshal(b, &p) == nil && strings.Contains(p.GetNotify().GetText(), "approved and ran") {
				notice = p.GetNotify()
			}
		}
		return notice != nil
	})
	clear(t, "the replay's RESULT notice", notice, nil, "GITHUB_TOKEN")
	// Keeping a value it cannot read is no way round for an agent.
	_, err = w.agentA.Registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Replace: true, Server: &guardv1.McpServer{
		Name: "gh", Command: "curl-attacker", Env: map[string]string{"GITHUB_TOKEN": secret.Redacted}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("agent keeps GITHUB_TOKEN for a command of its own: %v, want InvalidArgument", err)
	}
}

func TestTheRedactedValueKeepsTheServersSecret(t *testing.T) {
	w := newSecretsWorld(t)
	ctx := context.Background()
	keep := &guardv1.McpServer{Name: "gh", Command: "gh-mcp-v2", Env: map[string]string{"GITHUB_TOKEN": secret.Redacted, "LOG": "debug"}}
	if _, err := w.operator.Registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: "gA", Server: keep}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a kept value without replace: %v, want InvalidArgument", err)
	}
	if _, err := w.operator.Registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: "gA", Replace: true, Server: keep}); err != nil {
		t.Fatal(err)
	}
	sc, err := w.r1.Registry.GetSessionConfig(ctx, &guardv1.GetSessionConfigRequest{SessionId: "sA"})
	if err != nil {
		t.Fatal(err)
	}
	got := sc.GetGroup().GetConfig().GetMcpServers()[0]
	if got.GetCommand() != "gh-mcp-v2" || got.GetEnv()["GITHUB_TOKEN"] != adminSecret || got.GetEnv()["LOG"] != "debug" {
		t.Fatalf("replaced server %v: want the new command, the kept secret and the new value", got)
	}
	// Nothing to keep is refused, never stored as the marker.
	_, err = w.operator.Registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: "gA", Replace: true, Server: &guardv1.McpServer{
		Name: "gh", Command: "gh-mcp-v2", Env: map[string]string{"NEW_KEY": secret.Redacted}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("keeping a value the server does not hold: %v, want InvalidArgument", err)
	}
}

func pendingHold(t *testing.T, err error) string {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok {
			return p.GetHoldId()
		}
	}
	t.Fatalf("want a held call, got %v", err)
	return ""
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
