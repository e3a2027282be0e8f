package registry_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/agents"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func payload(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type fixture struct {
	srv   *testserver.Server
	r     *testRunner
	group string
	sess  *guardv1.Session
}

func setup(t *testing.T) fixture {
	srv := testserver.Start(t)
	g := group(t, srv, "src", "")
	// A trusted (global-scope) group: its agents.create is allowed without an
	// approval, so the hand-made ALLOWs these tests cite pass the live
	// re-check at apply.
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ($1, 'global')`, g); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, srv, "runner-a", "h1", nil)
	r.mustRegister(t)
	return fixture{srv: srv, r: r, group: g, sess: r.open(t, g)}
}

func (f fixture) apply(t *testing.T, decisionID, action string, p map[string]any, resource map[string]string) (*guardv1.ApplyActionResponse, error) {
	t.Helper()
	return f.r.c.Registry.ApplyAction(ctxT(t), &guardv1.ApplyActionRequest{
		DecisionId: decisionID, SessionId: f.sess.GetId(), Action: action, Payload: payload(t, p), Resource: resource,
	})
}

func TestCitationsAreRefusedWhenMissingStaleMismatchedOrReused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	other := f.r.open(t, group(t, f.srv, "other", ""))
	create := func(name string) map[string]any { return map[string]any{"name": name} }

	cases := []struct {
		name     string
		decision string
		code     codes.Code
		why      string
	}{
		{"missing", "", codes.InvalidArgument, "decision_id"},
		{"unknown", "dec_nope", codes.FailedPrecondition, "not found"},
		{"stale", allow(t, f.srv, f.sess.GetId(), "agents.create", 10*time.Minute), codes.FailedPrecondition, "older than the citation window"},
		{"another session", allow(t, f.srv, other.GetId(), "agents.create", 0), codes.PermissionDenied, "another session"},
		{"another action", allow(t, f.srv, f.sess.GetId(), "a2a.send", 0), codes.FailedPrecondition, `authorized "a2a.send"`},
		{"not an allow", decision(t, f.srv, f.sess.GetId(), "agents.create", "hold", 0), codes.FailedPrecondition, "not an allow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.apply(t, c.decision, "agents.create", create("x-"+randHex()), nil)
			if status.Code(err) != c.code || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("err = %v, want %v mentioning %q", err, c.code, c.why)
			}
		})
	}

	good := allow(t, f.srv, f.sess.GetId(), "agents.create", 0)
	if _, err := f.apply(t, good, "agents.create", create("first-"+randHex()), nil); err != nil {
		t.Fatalf("fresh citation: %v", err)
	}
	_, err := f.apply(t, good, "agents.create", create("second-"+randHex()), nil)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already cited") {
		t.Fatalf("reused citation: %v, want FailedPrecondition (single use)", err)
	}
	var groups int
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM agent_groups WHERE name LIKE 'x-%' OR name LIKE 'second-%'`).Scan(&groups); err != nil || groups != 0 {
		t.Fatalf("refused citations created %d groups (%v)", groups, err)
	}
}

func TestRunnerCannotActForAnotherRunnersSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := newRunner(t, f.srv, "runner-b", "h2", nil)
	b.mustRegister(t)

	// authn refuses the foreign session header outright.
	asAgent := testserver.ClientsFor(f.srv.Conn(t, b.token, f.sess.GetId()))
	_, err := asAgent.Registry.ListGroups(ctxT(t), &guardv1.ListGroupsRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("foreign x-clawguard-session: %v, want PermissionDenied", err)
	}
	_, err = asAgent.Registry.ApplyAction(ctxT(t), &guardv1.ApplyActionRequest{DecisionId: "d", SessionId: f.sess.GetId(), Action: "agents.create"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("foreign x-clawguard-session on ApplyAction: %v, want PermissionDenied", err)
	}
	// ApplyAction refuses a foreign session even with a valid ALLOW for it.
	d := allow(t, f.srv, f.sess.GetId(), "agents.create", 0)
	_, err = b.c.Registry.ApplyAction(ctxT(t), &guardv1.ApplyActionRequest{DecisionId: d, SessionId: f.sess.GetId(), Action: "agents.create", Payload: payload(t, map[string]any{"name": "stolen"})})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("ApplyAction on a foreign session: %v, want PermissionDenied", err)
	}
	// The citation was not consumed by the refused attempt: the owner may use it.
	if _, err := f.apply(t, d, "agents.create", map[string]any{"name": "legit-" + randHex()}, nil); err != nil {
		t.Fatalf("owner citing its decision: %v", err)
	}
	// The asserted session must be the one acted on.
	own := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	otherSess := f.r.open(t, group(t, f.srv, "other", ""))
	_, err = own.Registry.ApplyAction(ctxT(t), &guardv1.ApplyActionRequest{DecisionId: d, SessionId: otherSess.GetId(), Action: "agents.create"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("session_id other than the asserted one: %v, want PermissionDenied", err)
	}
}

func TestApplyCreateAgent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	name := "Research Bot " + randHex()
	res, err := f.apply(t, allow(t, f.srv, f.sess.GetId(), "agents.create", 0), "agents.create", map[string]any{"name": name, "instructions": "be brief"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetResult().GetFields()["agent_group_id"].GetStringValue()
	var (
		scope           string
		toNew, toParent string
	)
	err = f.srv.Pool.QueryRow(ctxT(t), `SELECT c.cli_scope,
		(SELECT name FROM agent_destinations WHERE agent_group_id = $2 AND target_agent_group_id = $1),
		(SELECT name FROM agent_destinations WHERE agent_group_id = $1 AND target_agent_group_id = $2)
		FROM agent_groups g JOIN container_configs c ON c.agent_group_id = g.id WHERE g.id = $1 AND g.name = $3`, id, f.group, name).Scan(&scope, &toNew, &toParent)
	if err != nil {
		t.Fatalf("created group, config and destinations: %v", err)
	}
	if scope != "group" || toNew != normalized(name) || toParent != "parent" {
		t.Fatalf("scope=%q creator→new=%q new→creator=%q", scope, toNew, toParent)
	}
	// The instructions are kept with the group (its agent starts with them),
	// and every read of the group carries them.
	got, err := f.srv.Operator(t).Registry.GetGroup(ctxT(t), &guardv1.GetGroupRequest{Id: id})
	if err != nil || got.GetGroup().GetInstructions() != "be brief" {
		t.Fatalf("created group's instructions = %q (%v), want %q", got.GetGroup().GetInstructions(), err, "be brief")
	}
	// Duplicate name → AlreadyExists, and the citation is left unused.
	d := allow(t, f.srv, f.sess.GetId(), "agents.create", 0)
	if _, err := f.apply(t, d, "agents.create", map[string]any{"name": name}, nil); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate name: %v, want AlreadyExists", err)
	}
	var cited bool
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT cited_at IS NOT NULL FROM decisions WHERE id = $1`, d).Scan(&cited); err != nil || cited {
		t.Fatalf("failed mutation consumed its citation (%v)", err)
	}
	if _, err := f.apply(t, d, "agents.create", map[string]any{"name": ""}, nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty name: %v, want InvalidArgument", err)
	}
	long := strings.Repeat("x", agents.MaxInstructions+1)
	if _, err := f.apply(t, d, "agents.create", map[string]any{"name": "long-" + randHex(), "instructions": long}, nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("instructions over the bound: %v, want InvalidArgument", err)
	}
	var events int
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM session_events WHERE session_id = $1 AND kind = 'action'`, f.sess.GetId()).Scan(&events); err != nil || events != 1 {
		t.Fatalf("action events = %d (%v), want 1", events, err)
	}
}

func normalized(s string) string {
	out, dash := []byte{}, false
	for _, c := range []byte(strings.ToLower(s)) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			out, dash = append(out, c), false
		} else if !dash {
			out, dash = append(out, '-'), true
		}
	}
	return string(out)
}

func TestApplySelfModUpdatesConfigAndRestartsEverySession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	mg := "mg_" + randHex()
	if _, err := f.srv.Pool.Exec(ctxT(t), `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ($1, 'slack', $1)`, mg); err != nil {
		t.Fatal(err)
	}
	res, err := f.r.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: f.group, MessagingGroupId: mg})
	if err != nil {
		t.Fatal(err)
	}
	second := res.GetSession()
	if second.GetId() == f.sess.GetId() || second.GetMessagingGroupId() != mg {
		t.Fatalf("second session = %v", second)
	}
	st := f.r.connect(t)

	bad := map[string]any{"apt": []any{"curl; rm -rf /"}}
	d := grantedAllow(t, f.srv, f.sess.GetId(), "self_mod.install_packages", "install_packages", bad)
	if _, err := f.apply(t, d, "self_mod.install_packages", bad, nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad package name: %v, want InvalidArgument", err)
	}
	pkgs := map[string]any{"apt": []any{"curl", "jq"}, "npm": []any{"@scope/left-pad"}}
	d = grantedAllow(t, f.srv, f.sess.GetId(), "self_mod.install_packages", "install_packages", pkgs)
	if _, err := f.apply(t, d, "self_mod.install_packages", pkgs, nil); err != nil {
		t.Fatal(err)
	}
	var (
		apt, npm []string
		mcp      string
		version  int64
	)
	read := func() {
		t.Helper()
		if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT apt_packages, npm_packages, mcp_servers::text, version FROM container_configs WHERE agent_group_id = $1`, f.group).Scan(&apt, &npm, &mcp, &version); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if strings.Join(apt, ",") != "curl,jq" || strings.Join(npm, ",") != "@scope/left-pad" || version != 2 {
		t.Fatalf("config apt=%v npm=%v version=%d", apt, npm, version)
	}
	restarted := map[string]bool{}
	for range 2 {
		p := st.next(t)
		r := p.GetRestart()
		if r == nil || !r.GetRebuildImage() || r.GetConfigVersion() != 2 {
			t.Fatalf("push = %v, want a rebuild restart at version 2", p)
		}
		restarted[p.GetSessionId()] = true
		st.ack(t, p.GetId())
	}
	if !restarted[f.sess.GetId()] || !restarted[second.GetId()] {
		t.Fatalf("restarted sessions = %v, want both", restarted)
	}

	noCommand := map[string]any{"name": "fs"}
	d = grantedAllow(t, f.srv, f.sess.GetId(), "self_mod.add_mcp_server", "add_mcp_server", noCommand)
	if _, err := f.apply(t, d, "self_mod.add_mcp_server", noCommand, nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("MCP server without command: %v, want InvalidArgument", err)
	}
	server := map[string]any{"name": "fs", "command": "mcp-fs", "args": []any{"--root", "/data"}, "env": map[string]any{"LEVEL": "1"}}
	d = grantedAllow(t, f.srv, f.sess.GetId(), "self_mod.add_mcp_server", "add_mcp_server", server)
	if _, err := f.apply(t, d, "self_mod.add_mcp_server", server, nil); err != nil {
		t.Fatal(err)
	}
	read()
	if version != 3 || !strings.Contains(mcp, `"command": "mcp-fs"`) || !strings.Contains(mcp, `"--root"`) {
		t.Fatalf("mcp_servers=%s version=%d", mcp, version)
	}
	for range 2 {
		p := st.next(t)
		if r := p.GetRestart(); r == nil || !r.GetRebuildImage() || r.GetConfigVersion() != 3 {
			t.Fatalf("push = %v, want a rebuild restart at version 3 (the MCP servers are in the image)", p)
		}
	}
}

func TestApplyA2ASendDeliversAcrossRunnersAndReplicas(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	b := testserver.StartOn(t, a.URL)
	src, dst, stranger := group(t, a, "src", ""), group(t, a, "dst", ""), group(t, a, "stranger", "")
	if _, err := a.Pool.Exec(ctxT(t), `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ($1, 'dst', $2)`, src, dst); err != nil {
		t.Fatal(err)
	}
	ra := newRunner(t, a, "runner-a", "h1", nil)
	ra.mustRegister(t)
	srcSess := ra.open(t, src)
	rb := newRunner(t, a, "runner-b", "h2", nil)
	rb.mustRegister(t)
	dstSess := rb.open(t, dst)
	stB := rb.on(t, b).connect(t) // runner-b's stream is on replica b
	stB.heartbeat(t)

	f := fixture{srv: a, r: ra, group: src, sess: srcSess}
	d := allow(t, a, srcSess.GetId(), "a2a.send", 0)
	if _, err := f.apply(t, d, "a2a.send", map[string]any{"text": "psst"}, map[string]string{"from": src, "to": stranger}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("send without a destination: %v, want PermissionDenied", err)
	}
	res, err := f.apply(t, d, "a2a.send", map[string]any{"text": "hello from h1"}, map[string]string{"from": src, "to": dst})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetResult().GetFields()["target_session_id"].GetStringValue(); got != dstSess.GetId() {
		t.Fatalf("target session = %q, want %q", got, dstSess.GetId())
	}
	p := stB.next(t)
	m := p.GetDeliver()
	if m == nil || m.GetText() != "hello from h1" || m.GetFromAgentGroupId() != src || m.GetFromSessionId() != srcSess.GetId() || p.GetSessionId() != dstSess.GetId() {
		t.Fatalf("push = %v", p)
	}

	// A target with no session gets one on a live runner.
	if _, err := a.Pool.Exec(ctxT(t), `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ($1, 'stranger', $2)`, src, stranger); err != nil {
		t.Fatal(err)
	}
	res, err = f.apply(t, allow(t, a, srcSess.GetId(), "a2a.send", 0), "a2a.send", map[string]any{"text": "wake up"}, map[string]string{"to": stranger})
	if err != nil {
		t.Fatal(err)
	}
	var owner string
	err = a.Pool.QueryRow(ctxT(t), `SELECT COALESCE(runner_id, '') FROM sessions WHERE id = $1 AND agent_group_id = $2`,
		res.GetResult().GetFields()["target_session_id"].GetStringValue(), stranger).Scan(&owner)
	if err != nil || (owner != ra.id && owner != rb.id) {
		t.Fatalf("opened target session owner = %q (%v)", owner, err)
	}
}

// End to end with the real guard: the ALLOW Guard.Decide logs is the citation.
func TestApplyActionCitesARealGuardAllow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.srv.Pool.Exec(ctxT(t), `UPDATE container_configs SET cli_scope = 'global' WHERE agent_group_id = $1`, f.group); err != nil {
		t.Fatal(err)
	}
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	name := "child-" + randHex()
	p := payload(t, map[string]any{"name": name})
	actor := &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: f.group, SessionId: f.sess.GetId()}}}
	res, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "agents.create", Actor: actor, Payload: p})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW || res.GetDecisionId() == "" {
		t.Fatalf("decision = %v (id %q), want an allow for a global-scope group", res.GetDecision(), res.GetDecisionId())
	}
	apply := &guardv1.ApplyActionRequest{DecisionId: res.GetDecisionId(), SessionId: f.sess.GetId(), Action: "agents.create", Payload: p}
	if _, err := asAgent.Registry.ApplyAction(ctxT(t), apply); err != nil {
		t.Fatalf("cite the guard's allow: %v", err)
	}
	if _, err := asAgent.Registry.ApplyAction(ctxT(t), apply); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("cite it again: %v, want FailedPrecondition", err)
	}
}

// The guard always holds self-modification, so an ALLOW for it that carries
// no grant was not won through an approval: its citation is refused and
// left unconsumed, and nothing is installed.
func TestApplySelfModRefusesAGrantlessAllow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cases := []struct {
		action string
		p      map[string]any
	}{
		{"self_mod.install_packages", map[string]any{"apt": []any{"curl"}}},
		{"self_mod.add_mcp_server", map[string]any{"name": "fs", "command": "mcp-fs"}},
	}
	for _, c := range cases {
		d := allow(t, f.srv, f.sess.GetId(), c.action, 0)
		_, err := f.apply(t, d, c.action, c.p, nil)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "grant") {
			t.Fatalf("%s with a grantless ALLOW: %v, want FailedPrecondition naming the missing grant", c.action, err)
		}
		var cited bool
		if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT cited_at IS NOT NULL FROM decisions WHERE id = $1`, d).Scan(&cited); err != nil || cited {
			t.Fatalf("%s: refused citation was consumed (%v)", c.action, err)
		}
	}
	var configs int
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM container_configs WHERE agent_group_id = $1 AND (apt_packages <> '{}' OR mcp_servers <> '[]'::jsonb)`, f.group).Scan(&configs); err != nil || configs != 0 {
		t.Fatalf("configs changed by refused self_mod citations = %d (%v)", configs, err)
	}
}
