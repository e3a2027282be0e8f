package mcpcalls_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/snapshot"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// world is a group g1 with MCP server fs, a session s1 on runner r1, and
// owners alice and bob.
type world struct {
	srv    *testserver.Server
	op     testserver.Clients
	agent  testserver.Clients // runner r1 asserting session s1
	runner testserver.Clients // runner r1 as itself
	ctx    context.Context
	group  string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	srv := testserver.Start(t)
	ctx := context.Background()
	w := &world{srv: srv, op: srv.Operator(t), ctx: ctx}
	g, err := w.op.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	w.group = g.GetGroup().GetId()
	if _, err := w.op.Registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: w.group,
		Server: &guardv1.McpServer{Name: "fs", Command: "/bin/fs-mcp", Env: map[string]string{"TOKEN": "s3cret"}}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', '` + w.group + `', 'r1')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, u := range []string{"telegram:1", "telegram:2"} {
		if _, err := w.op.Registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: u}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.op.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: u, Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
			t.Fatal(err)
		}
	}
	tok := srv.Token(t, "runner", "r1", "")
	w.agent = testserver.ClientsFor(srv.Conn(t, tok, "s1"))
	w.runner = testserver.ClientsFor(srv.Conn(t, tok, ""))
	return w
}

// call is an mcp.call request as the runner sends it.
func call(t *testing.T, server, tool string, args map[string]any) *guardv1.DecideRequest {
	t.Helper()
	p, err := structpb.NewStruct(map[string]any{"server": server, "tool": tool, "arguments": args})
	if err != nil {
		t.Fatal(err)
	}
	d, err := mcpcall.Digest(server, tool, p.AsMap()["arguments"].(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	return &guardv1.DecideRequest{Action: mcpcall.CatalogAction, Resource: mcpcall.Resource(server, tool, d), Payload: p}
}

func (w *world) decide(t *testing.T, req *guardv1.DecideRequest) *guardv1.DecideResponse {
	t.Helper()
	resp, err := w.agent.Guard.Decide(w.ctx, req)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return resp
}

func (w *world) setTool(t *testing.T, tool string, e guardv1.Effect, approvals int32, mode guardv1.EnforcementMode) {
	t.Helper()
	if _, err := w.op.Registry.SetMcpTool(w.ctx, &guardv1.SetMcpToolRequest{Group: w.group, Server: "fs", Tool: tool,
		Effect: e, Approvals: approvals, Mode: mode}); err != nil {
		t.Fatalf("SetMcpTool: %v", err)
	}
}

func effect(r *guardv1.DecideResponse) guardv1.Effect { return r.GetDecision().GetEffect() }

// Unset tools hold; the operator's tool effect and the server default
// decide; a server the group does not have denies; the reasons name both.
func TestEffectsPerToolAndServerDefault(t *testing.T) {
	w := newWorld(t)
	args := map[string]any{"path": "a.txt", "content": "hi"}
	if r := w.decide(t, call(t, "fs", "write_file", args)); effect(r) != guardv1.Effect_EFFECT_HOLD ||
		!strings.Contains(r.GetDecision().GetReason(), "write_file") || !strings.Contains(r.GetDecision().GetReason(), "fs") {
		t.Fatalf("unset tool: %v, want HOLD naming server and tool", r.GetDecision())
	}
	if _, err := w.op.Registry.SetMcpServerDefault(w.ctx, &guardv1.SetMcpServerDefaultRequest{Group: w.group, Server: "fs", Effect: guardv1.Effect_EFFECT_ALLOW}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, call(t, "fs", "write_file", args)); effect(r) != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("server default allow: %v", r.GetDecision())
	}
	w.setTool(t, "write_file", guardv1.Effect_EFFECT_DENY, 0, 0)
	if r := w.decide(t, call(t, "fs", "write_file", args)); effect(r) != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("tool deny over an allowing default: %v", r.GetDecision())
	}
	if r := w.decide(t, call(t, "fs", "read_file", args)); effect(r) != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("another tool keeps the default: %v", r.GetDecision())
	}
	if r := w.decide(t, call(t, "github", "merge", nil)); effect(r) != guardv1.Effect_EFFECT_DENY ||
		!strings.Contains(r.GetDecision().GetReason(), `no MCP server "github"`) {
		t.Fatalf("a server the group does not have: %v", r.GetDecision())
	}
	// A resource whose digest is not the payload's is refused before any hold.
	bad := call(t, "fs", "read_file", args)
	bad.Resource[mcpcall.KeyDigest] = strings.Repeat("0", 64)
	if r := w.decide(t, bad); effect(r) != guardv1.Effect_EFFECT_DENY || !strings.Contains(r.GetDecision().GetReason(), "digest") {
		t.Fatalf("mismatched digest: %v", r.GetDecision())
	}

	// The listing says the effect and where it came from.
	tools, err := w.op.Registry.ListMcpTools(w.ctx, &guardv1.ListMcpToolsRequest{Group: w.group, Server: "fs"})
	if err != nil || len(tools.GetTools()) != 1 || tools.GetTools()[0].GetEffect() != guardv1.Effect_EFFECT_DENY ||
		tools.GetTools()[0].GetSource() != guardv1.McpEffectSource_MCP_EFFECT_SOURCE_TOOL {
		t.Fatalf("ListMcpTools: %v, %v", tools, err)
	}
	// The runner's report lists new tools, which take the server's default.
	rep, err := w.runner.Registry.ReportMcpTools(w.ctx, &guardv1.ReportMcpToolsRequest{SessionId: "s1", Server: "fs", State: "running",
		Tools: []*guardv1.ReportedMcpTool{{Name: "write_file"}, {Name: "read_file", Description: "reads"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.GetTools(); len(got) != 2 || got[0].GetEffect() != guardv1.Effect_EFFECT_DENY || got[1].GetEffect() != guardv1.Effect_EFFECT_ALLOW ||
		got[1].GetSource() != guardv1.McpEffectSource_MCP_EFFECT_SOURCE_SERVER_DEFAULT {
		t.Fatalf("report answer: %v", got)
	}
	// Another runner's report for this session is refused.
	other := testserver.ClientsFor(w.srv.Conn(t, w.srv.Token(t, "runner", "r2", ""), ""))
	if _, err := other.Registry.ReportMcpTools(w.ctx, &guardv1.ReportMcpToolsRequest{SessionId: "s1", Server: "fs", State: "running"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("report from a runner not hosting the session: %v", err)
	}
	servers, err := w.op.Registry.ListMcpServers(w.ctx, &guardv1.ListMcpServersRequest{Group: w.group})
	if err != nil || len(servers.GetServers()) != 1 || servers.GetServers()[0].GetDefaultEffect() != guardv1.Effect_EFFECT_ALLOW ||
		len(servers.GetServers()[0].GetRunners()) != 1 || servers.GetServers()[0].GetRunners()[0].GetTools() != 2 {
		t.Fatalf("ListMcpServers: %v, %v", servers, err)
	}
	// A setting change tells the group's session its tools changed.
	var n int
	if err := w.srv.Pool.QueryRow(w.ctx, `SELECT count(*) FROM runner_pushes WHERE session_id = 's1' AND kind = 'notify' AND position('list them again' in convert_from(body, 'SQL_ASCII')) > 0`).Scan(&n); err != nil || n < 2 {
		t.Fatalf("tools-changed pushes: %d (%v), want one per change", n, err)
	}
}

// hold creates a held call's hold (with the runner's card) and returns its id.
func (w *world) hold(t *testing.T, req *guardv1.DecideRequest) string {
	t.Helper()
	req.Card = &guardv1.HoldCard{Title: "MCP tool call", Question: "call?", Kind: mcpcall.ApprovalKind,
		DeliveryAction: mcpcall.DeliveryAction, Payload: req.GetPayload()}
	r := w.decide(t, req)
	if effect(r) != guardv1.Effect_EFFECT_HOLD || r.GetHoldId() == "" {
		t.Fatalf("want a hold: %v (%s)", r.GetDecision(), r.GetHoldError())
	}
	return r.GetHoldId()
}

func (w *world) approve(t *testing.T, hold, user string) {
	t.Helper()
	if _, err := w.op.Approvals.Resolve(w.ctx, &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: user}); err != nil {
		t.Fatalf("approve %s as %s: %v", hold, user, err)
	}
}

var replays int

// replay is a grant-carrying request; each attempt has its own request id
// (a repeated id gets the first attempt's answer).
func replay(req *guardv1.DecideRequest, hold string) *guardv1.DecideRequest {
	replays++
	return &guardv1.DecideRequest{Action: req.GetAction(), Resource: req.GetResource(), Payload: req.GetPayload(), Grant: hold,
		RequestId: fmt.Sprintf("replay:%s:%d", hold, replays)}
}

// An approval is bound to the exact call: edited arguments, another tool or
// another server are refused; the approved call is allowed once, and its
// apply is claimed once.
func TestApprovalBindsTheExactArguments(t *testing.T) {
	w := newWorld(t)
	req := call(t, "fs", "write_file", map[string]any{"path": "a.txt", "content": "approved"})
	h := w.hold(t, req)
	w.approve(t, h, "telegram:1")

	for name, edited := range map[string]*guardv1.DecideRequest{
		"edited arguments": call(t, "fs", "write_file", map[string]any{"path": "a.txt", "content": "rm -rf"}),
		"another tool":     call(t, "fs", "delete_file", map[string]any{"path": "a.txt", "content": "approved"}),
	} {
		if r := w.decide(t, replay(edited, h)); effect(r) != guardv1.Effect_EFFECT_DENY {
			t.Fatalf("%s: %v, want DENY", name, r.GetDecision())
		}
	}
	// The approved payload with a resource digest forged to match edited
	// arguments: the payload no longer matches its digest.
	forged := replay(req, h)
	forged.Payload = call(t, "fs", "write_file", map[string]any{"path": "a.txt", "content": "rm -rf"}).GetPayload()
	if r := w.decide(t, forged); effect(r) != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("edited payload under the approved digest: %v", r.GetDecision())
	}
	r := w.decide(t, replay(req, h))
	if effect(r) != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("the approved call: %v", r.GetDecision())
	}
	apply := func(claim string, payload *structpb.Struct) (*guardv1.ApplyActionResponse, error) {
		p := proto(payload)
		p.Fields["claim"] = structpb.NewStringValue(claim)
		return w.agent.Registry.ApplyAction(w.ctx, &guardv1.ApplyActionRequest{DecisionId: r.GetDecisionId(), SessionId: "s1",
			Action: mcpcall.CatalogAction, Payload: p, Resource: req.GetResource()})
	}
	edited := call(t, "fs", "write_file", map[string]any{"path": "a.txt", "content": "rm -rf"})
	if _, err := apply("c1", edited.GetPayload()); status.Code(err) == codes.OK {
		t.Fatal("an apply of edited arguments under the approved decision succeeded")
	}
	first, err := apply("c1", req.GetPayload())
	if err != nil || first.GetResult().AsMap()["claim"] != "c1" {
		t.Fatalf("first apply: %v, %v", first, err)
	}
	again, err := apply("c2", req.GetPayload())
	if err != nil || again.GetResult().AsMap()["claim"] != "c1" {
		t.Fatalf("a second claim must answer the first one's: %v, %v", again, err)
	}
}

func proto(s *structpb.Struct) *structpb.Struct {
	out := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range s.GetFields() {
		out.Fields[k] = v
	}
	return out
}

// Re-checked live: a server removed, or the tool set to deny, after the
// approval denies the replay, and the grant stays unused.
func TestReplayIsRecheckedLive(t *testing.T) {
	w := newWorld(t)
	req := call(t, "fs", "write_file", map[string]any{"path": "a.txt"})
	h := w.hold(t, req)
	w.approve(t, h, "telegram:1")
	w.setTool(t, "write_file", guardv1.Effect_EFFECT_DENY, 0, 0)
	if r := w.decide(t, replay(req, h)); effect(r) != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("tool denied after approval: %v", r.GetDecision())
	}
	w.setTool(t, "write_file", guardv1.Effect_EFFECT_UNSPECIFIED, 0, 0)
	if _, err := w.op.Registry.RemoveGroupMcpServer(w.ctx, &guardv1.RemoveGroupMcpServerRequest{Group: w.group, Name: "fs"}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, replay(req, h)); effect(r) != guardv1.Effect_EFFECT_DENY || !strings.Contains(r.GetDecision().GetReason(), "no MCP server") {
		t.Fatalf("server removed after approval: %v", r.GetDecision())
	}
	var consumed bool
	if err := w.srv.Pool.QueryRow(w.ctx, `SELECT consumed_at IS NOT NULL FROM holds WHERE id = $1`, h).Scan(&consumed); err != nil || consumed {
		t.Fatalf("grant consumed by a denied replay (%v, %v)", consumed, err)
	}
}

// A tool's quorum needs that many distinct approvals; its audit mode lets
// the call run and logs what enforce would have answered.
func TestQuorumAndAuditModeOnATool(t *testing.T) {
	w := newWorld(t)
	w.setTool(t, "write_file", guardv1.Effect_EFFECT_HOLD, 2, 0)
	req := call(t, "fs", "write_file", map[string]any{"path": "q.txt"})
	h := w.hold(t, req)
	w.approve(t, h, "telegram:1")
	if r := w.decide(t, replay(req, h)); effect(r) != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("one of two approvals: %v, want DENY", r.GetDecision())
	}
	w.approve(t, h, "telegram:2")
	if r := w.decide(t, replay(req, h)); effect(r) != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("two of two approvals: %v", r.GetDecision())
	}

	w.setTool(t, "write_file", guardv1.Effect_EFFECT_HOLD, 0, guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT)
	r := w.decide(t, call(t, "fs", "write_file", map[string]any{"path": "audit.txt"}))
	if effect(r) != guardv1.Effect_EFFECT_ALLOW || !strings.Contains(r.GetDecision().GetReason(), "audit mode") {
		t.Fatalf("audit mode: %v", r.GetDecision())
	}
	var would, mode string
	if err := w.srv.Pool.QueryRow(w.ctx, `SELECT would_effect, mode FROM decisions WHERE id = $1`, r.GetDecisionId()).Scan(&would, &mode); err != nil ||
		would != "hold" || mode != "audit" {
		t.Fatalf("logged would_effect %q mode %q (%v)", would, mode, err)
	}
	// The why page names the server and the tool.
	got, err := w.op.Registry.GetDecision(w.ctx, &guardv1.GetDecisionRequest{Id: r.GetDecisionId()})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.String(); !strings.Contains(s, "write_file") || !strings.Contains(s, "fs") {
		t.Fatalf("GetDecision does not name server and tool: %s", s)
	}
}

// The settings are admin RPCs like the others: an agent reads its own
// group's, and its change of a setting is held for its group's admins.
func TestAnAgentsSettingChangeIsHeld(t *testing.T) {
	w := newWorld(t)
	if _, err := w.agent.Registry.ListMcpTools(w.ctx, &guardv1.ListMcpToolsRequest{Group: w.group, Server: "fs"}); err != nil {
		t.Fatalf("an agent reading its own group's tools: %v", err)
	}
	_, err := w.agent.Registry.SetMcpTool(w.ctx, &guardv1.SetMcpToolRequest{Group: w.group, Server: "fs", Tool: "write_file", Effect: guardv1.Effect_EFFECT_ALLOW})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "approval") {
		t.Fatalf("an agent allowing its own tool: %v, want held for approval", err)
	}
	var n int
	if err := w.srv.Pool.QueryRow(w.ctx, `SELECT count(*) FROM mcp_tool_settings`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the held setting was applied: %d rows (%v)", n, err)
	}
}

// A replica's copy loaded before a setting changed never answers after it:
// a tool set to deny, a default changed, the server removed are each decided
// live from the first decision after their commit. While nothing changed,
// the copy answers (mcp.call's facts are all lookups of mirrored tables).
func TestSettingsFromAStaleCopyNeverAnswer(t *testing.T) {
	w := newWorld(t)
	w.setTool(t, "read_file", guardv1.Effect_EFFECT_ALLOW, 0, 0)
	cat, err := app.BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot.New(w.srv.Pool, cat.Tables(), snapshot.Options{})
	if err := snap.Refresh(w.ctx); err != nil {
		t.Fatal(err)
	}
	var fromCopy, stale atomic.Int64
	eng := guard.NewEngine(cat, w.srv.Pool, guard.Options{Snapshot: snap, ObserveSnapshot: func(outcome string) {
		switch outcome {
		case "snapshot":
			fromCopy.Add(1)
		case "stale":
			stale.Add(1)
		}
	}})
	t.Cleanup(eng.Close)
	decide := func() *guardv1.DecideResponse {
		t.Helper()
		req := call(t, "fs", "read_file", map[string]any{"path": "a"})
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: w.group, SessionId: "s1"}}}
		resp, err := eng.DecideProto(w.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := decide(); effect(r) != guardv1.Effect_EFFECT_ALLOW || fromCopy.Load() != 1 {
		t.Fatalf("copy current: %v (from the copy: %d)", r.GetDecision(), fromCopy.Load())
	}
	for _, st := range []struct {
		name   string
		change func()
		want   guardv1.Effect
	}{
		{"the tool set to deny", func() { w.setTool(t, "read_file", guardv1.Effect_EFFECT_DENY, 0, 0) }, guardv1.Effect_EFFECT_DENY},
		{"the tool's setting removed: the default holds", func() { w.setTool(t, "read_file", guardv1.Effect_EFFECT_UNSPECIFIED, 0, 0) }, guardv1.Effect_EFFECT_HOLD},
		{"the server's default set to allow", func() {
			if _, err := w.op.Registry.SetMcpServerDefault(w.ctx, &guardv1.SetMcpServerDefaultRequest{Group: w.group, Server: "fs", Effect: guardv1.Effect_EFFECT_ALLOW}); err != nil {
				t.Fatal(err)
			}
		}, guardv1.Effect_EFFECT_ALLOW},
		{"the server removed", func() {
			if _, err := w.op.Registry.RemoveGroupMcpServer(w.ctx, &guardv1.RemoveGroupMcpServerRequest{Group: w.group, Name: "fs"}); err != nil {
				t.Fatal(err)
			}
		}, guardv1.Effect_EFFECT_DENY},
	} {
		st.change()
		before := stale.Load()
		if r := decide(); effect(r) != st.want {
			t.Fatalf("%s: %v, want %v", st.name, r.GetDecision(), st.want)
		}
		if stale.Load() == before {
			t.Fatalf("%s: answered from the stale copy", st.name)
		}
	}
}

// The listings page like every List RPC: by name, a token bound to the list.
func TestToolListingPages(t *testing.T) {
	w := newWorld(t)
	for _, tool := range []string{"c", "a", "b"} {
		w.setTool(t, tool, guardv1.Effect_EFFECT_ALLOW, 0, 0)
	}
	first, err := w.op.Registry.ListMcpTools(w.ctx, &guardv1.ListMcpToolsRequest{Group: w.group, Server: "fs", Limit: 2})
	if err != nil || len(first.GetTools()) != 2 || first.GetTools()[0].GetTool() != "a" || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	next, err := w.op.Registry.ListMcpTools(w.ctx, &guardv1.ListMcpToolsRequest{Group: w.group, Server: "fs", Limit: 2, PageToken: first.GetNextPageToken()})
	if err != nil || len(next.GetTools()) != 1 || next.GetTools()[0].GetTool() != "c" || next.GetNextPageToken() != "" {
		t.Fatalf("second page: %v, %v", next, err)
	}
	if _, err := w.op.Registry.ListMcpServers(w.ctx, &guardv1.ListMcpServersRequest{Group: w.group, PageToken: first.GetNextPageToken()}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a tools token on the servers list: %v, want InvalidArgument", err)
	}
}
