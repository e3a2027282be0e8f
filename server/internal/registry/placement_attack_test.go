package registry_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 12, "a runner token is a key to every group": host and labels were
// self-declared, so a runner re-registering with the labels of a pinned
// host got that host's groups. Now they are the operator's, on the token,
// and a registration may narrow them, never widen them.
func TestAttackRunnerCannotDeclareAnotherHostsPlacement(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	pinned := group(t, srv, "pinned", "h1")
	gpu := group(t, srv, "gpu", "gpu=true")
	free := group(t, srv, "free", "")

	intruder := newRunner(t, srv, "runner-h2", "h2", nil)
	for name, decl := range map[string]struct {
		host   string
		labels map[string]string
	}{
		"the pinned host":           {"h1", nil},
		"the pinned host as label":  {"", map[string]string{"host": "h1"}},
		"a label of another runner": {"", map[string]string{"gpu": "true"}},
	} {
		intruder.host, intruder.labels = decl.host, decl.labels
		if _, err := intruder.register(ctxT(t)); status.Code(err) != codes.PermissionDenied {
			t.Errorf("register declaring %s: %v, want PermissionDenied", name, err)
		}
	}
	// Its own identity registers, and it is the token's.
	intruder.host, intruder.labels = "", nil
	res, err := intruder.register(ctxT(t))
	if err != nil || res.GetHost() != "h2" {
		t.Fatalf("register with the token's identity: host %q, %v", res.GetHost(), err)
	}
	for name, g := range map[string]string{"pinned to h1": pinned, "selecting gpu=true": gpu} {
		if _, err := intruder.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: g}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("open a group %s from h2: %v, want PermissionDenied", name, err)
		}
	}
	if s := intruder.open(t, free); s.GetRunnerId() != intruder.id {
		t.Fatalf("an unpinned group goes to any runner: %v", s)
	}

	// The runner whose token carries gpu=true is placed the gpu group.
	gpuRunner := newRunner(t, srv, "runner-gpu", "h3", map[string]string{"gpu": "true", "zone": "eu"})
	gpuRunner.mustRegister(t)
	sess := gpuRunner.open(t, gpu)
	// It may narrow itself: dropping gpu takes the gpu session off it at
	// once; from then on it neither reads its config nor acts for it.
	gpuRunner.host, gpuRunner.labels = "h3", map[string]string{"zone": "eu"}
	gpuRunner.mustRegister(t)
	if _, err := gpuRunner.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: sess.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("config of a session no longer placed on it: %v, want PermissionDenied", err)
	}
	asAgent := testserver.ClientsFor(srv.Conn(t, gpuRunner.token, sess.GetId()))
	if _, err := asAgent.Registry.GetGroup(ctxT(t), &guardv1.GetGroupRequest{Id: gpu}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("act for a session no longer placed on it: %v, want PermissionDenied", err)
	}
}

// A runner token minted before bindings existed (no host, no labels) keeps
// working for unpinned groups only: what its runner declares is ignored.
func TestAttackUnboundRunnerTokenServesOnlyUnpinnedGroups(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	pinned := group(t, srv, "pinned", "h1")
	free := group(t, srv, "free", "")
	old := newRunner(t, srv, "runner-old", "", nil)
	old.host, old.labels = "h1", map[string]string{"host": "h1"} // declared, not on the token
	res, err := old.register(ctxT(t))
	if err != nil {
		t.Fatalf("an unbound token still registers: %v", err)
	}
	if res.GetHost() != "" || len(res.GetLabels()) != 0 {
		t.Fatalf("registered identity = %q %v, want none (declarations of an unbound token are ignored)", res.GetHost(), res.GetLabels())
	}
	if _, err := old.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: pinned}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unbound runner opens a pinned group: %v, want PermissionDenied", err)
	}
	old.open(t, free)
	list, err := srv.Operator(t).Registry.ListRunners(ctxT(t), &guardv1.ListRunnersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.GetRunners() {
		if r.GetId() == old.id && (r.GetHost() != "" || r.GetLabels()["host"] != "") {
			t.Fatalf("runners list shows a declared, untrusted identity: %v", r)
		}
	}
}

// A runner opens, reads the config and secrets of, and acts for only the
// sessions placed on it: not another runner's (live or by pin), with any
// token kind that is not that runner's.
func TestAttackRunnerReachesOnlySessionsPlacedOnIt(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	secretGroup := group(t, srv, "secret", "h1")
	free := group(t, srv, "free", "")
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO container_configs (agent_group_id, mcp_servers)
		VALUES ($1, '[{"name":"db","command":"mcp-db","env":{"DB_PASSWORD":"hunter2"}}]')`, secretGroup); err != nil {
		t.Fatal(err)
	}
	a := newRunner(t, srv, "runner-a", "h1", nil)
	a.mustRegister(t)
	aStream := a.connect(t)
	aStream.keepAlive(100 * time.Millisecond)
	secretSess := a.open(t, secretGroup)
	freeSess := a.open(t, free)

	b := newRunner(t, srv, "runner-b", "h2", nil)
	b.mustRegister(t)
	own := b.open(t, group(t, srv, "b-own", ""))

	// Another runner's sessions, by every door a runner has.
	for name, g := range map[string]string{"pinned elsewhere": secretGroup, "live on another runner": free} {
		if _, err := b.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: g}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("OpenSession of a group %s: %v, want PermissionDenied", name, err)
		}
	}
	for _, s := range []string{secretSess.GetId(), freeSess.GetId()} {
		if _, err := b.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: s}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("GetSessionConfig of runner-a's session %s: %v, want PermissionDenied", s, err)
		}
		asOther := testserver.ClientsFor(srv.Conn(t, b.token, s))
		if _, err := asOther.Registry.GetSessionHistory(ctxT(t), &guardv1.GetSessionHistoryRequest{Id: s}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("act for runner-a's session %s (history read): %v, want PermissionDenied", s, err)
		}
		if _, err := asOther.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "agents.create", Payload: nil}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("Decide as runner-a's agent %s: %v, want PermissionDenied", s, err)
		}
		if _, err := b.c.Registry.ApplyAction(ctxT(t), &guardv1.ApplyActionRequest{DecisionId: allow(t, srv, s, "agents.create", 0), SessionId: s, Action: "agents.create"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("ApplyAction for runner-a's session %s: %v, want PermissionDenied", s, err)
		}
	}
	// Naming the session in the actor instead of the header is no way round.
	_, err := b.c.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "agents.create", Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: secretGroup, SessionId: secretSess.GetId()}}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Decide naming runner-a's session as actor: %v, want PermissionDenied", err)
	}

	// As the agent of its own (group-scoped) session, b reads nothing of the
	// other groups: not their sessions, history or config.
	agent := testserver.ClientsFor(srv.Conn(t, b.token, own.GetId())).Registry
	if _, err := agent.GetSessionHistory(ctxT(t), &guardv1.GetSessionHistoryRequest{Id: secretSess.GetId()}); status.Code(err) != codes.NotFound {
		t.Errorf("agent reads another group's history: %v, want NotFound", err)
	}
	if _, err := agent.GetGroupConfig(ctxT(t), &guardv1.GetGroupConfigRequest{Group: secretGroup}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("agent reads another group's config: %v, want PermissionDenied (the admin baseline's cross-group deny)", err)
	}
	if l, err := agent.ListSessions(ctxT(t), &guardv1.ListSessionsRequest{}); err != nil || len(l.GetSessions()) != 1 || l.GetSessions()[0].GetId() != own.GetId() {
		t.Errorf("agent lists sessions: %v %v, want only its own", l, err)
	}
	// Even a cli_scope = global agent reads another group's MCP secrets redacted.
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ($1, 'global')`, own.GetAgentGroupId()); err != nil {
		t.Fatal(err)
	}
	cfg, err := agent.GetGroupConfig(ctxT(t), &guardv1.GetGroupConfigRequest{Group: secretGroup})
	if err != nil {
		t.Fatalf("global agent reads another group's config: %v", err)
	}
	if got := cfg.GetConfig().GetMcpServers()[0].GetEnv()["DB_PASSWORD"]; got == "hunter2" || got == "" {
		t.Errorf("global agent read another group's MCP secret as %q, want it redacted", got)
	}
	// The hosting runner itself gets the secret (it starts the agent with it).
	if c, err := a.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: secretSess.GetId()}); err != nil ||
		c.GetGroup().GetConfig().GetMcpServers()[0].GetEnv()["DB_PASSWORD"] != "hunter2" {
		t.Errorf("hosting runner's config: %v %v, want the secret", c, err)
	}

	// Tokens of other kinds have no runner door at all.
	user := srv.Token(t, "user", "", "telegram:mallory")
	for name, tok := range map[string]string{"user": user, "bridge": srv.BridgeToken(t, "telegram")} {
		c := testserver.ClientsFor(srv.Conn(t, tok, ""))
		if _, err := c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: free}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s token OpenSession: %v, want PermissionDenied", name, err)
		}
		if _, err := c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: secretSess.GetId()}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s token GetSessionConfig: %v, want PermissionDenied", name, err)
		}
		asserting := testserver.ClientsFor(srv.Conn(t, tok, secretSess.GetId()))
		if _, err := asserting.Registry.GetGroup(ctxT(t), &guardv1.GetGroupRequest{Id: secretGroup}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s token asserting a session: %v, want PermissionDenied", name, err)
		}
	}
}

// Re-pinning a group moves its sessions off runners the new pin does not
// match: the old runner loses them at once, the sweep places them anew.
func TestRepinMovesSessionsToAMatchingRunner(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, shortLease(3*time.Second))
	g := group(t, srv, "moving", "h1")
	a := newRunner(t, srv, "runner-h1", "h1", nil)
	a.mustRegister(t)
	sess := a.open(t, g)
	b := newRunner(t, srv, "runner-h2", "h2", nil)
	b.mustRegister(t)
	bStream := b.connect(t)
	bStream.keepAlive(100 * time.Millisecond)

	pin := "h2"
	if _, err := srv.Operator(t).Registry.UpdateGroup(ctxT(t), &guardv1.UpdateGroupRequest{Id: g, PinnedHost: &pin}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: sess.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("old runner reads a re-pinned session's config: %v, want PermissionDenied", err)
	}
	eventually(t, "the re-pinned session placed on runner-h2", func() bool {
		var owner *string
		_ = srv.Pool.QueryRow(ctxT(t), `SELECT runner_id FROM sessions WHERE id = $1`, sess.GetId()).Scan(&owner)
		return owner != nil && *owner == b.id
	})
	if _, err := b.c.Registry.GetSessionConfig(ctxT(t), &guardv1.GetSessionConfigRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatalf("new runner reads its session's config: %v", err)
	}
}
