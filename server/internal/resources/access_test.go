package resources_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	must[*guardv1.CreateUserResponse](t)(r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "tg:dana"}))

	for _, tc := range []struct {
		req   *guardv1.CreateTokenRequest
		code  codes.Code
		field string
	}{
		{&guardv1.CreateTokenRequest{}, codes.InvalidArgument, "kind"},
		{&guardv1.CreateTokenRequest{Kind: 9}, codes.InvalidArgument, "kind"},
		{&guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER}, codes.InvalidArgument, "runner_id"},
		{&guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_BRIDGE, RunnerId: "r1"}, codes.InvalidArgument, "runner_id"},
		{&guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_USER}, codes.InvalidArgument, "user_id"},
		{&guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_OPERATOR, UserId: "tg:dana"}, codes.InvalidArgument, "user_id"},
		{&guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_USER, UserId: "tg:nobody"}, codes.NotFound, "tg:nobody"},
	} {
		_, err := r.CreateToken(ctx, tc.req)
		wantCode(t, err, tc.code, tc.field)
	}

	user := must[*guardv1.CreateTokenResponse](t)(r.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_USER, UserId: "tg:dana", Name: "dana's phone"}))
	if user.GetSecret() == "" || user.GetToken().GetId()[:4] != "tok_" || user.GetToken().GetKind() != guardv1.Principal_PRINCIPAL_USER {
		t.Fatalf("created %v", user)
	}
	runner := must[*guardv1.CreateTokenResponse](t)(r.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, RunnerId: "r1"}))
	if runner.GetToken().GetRunnerId() != "r1" {
		t.Fatalf("created %v", runner)
	}
	// Only the hash is stored.
	if n := count(t, srv, `SELECT count(*) FROM tokens WHERE position($1::bytea IN hash) > 0`, []byte(user.GetSecret())); n != 0 {
		t.Fatal("secret stored in clear")
	}
	list := must[*guardv1.ListTokensResponse](t)(r.ListTokens(ctx, &guardv1.ListTokensRequest{})).GetTokens()
	found := 0
	for _, tok := range list {
		if tok.GetId() == user.GetToken().GetId() || tok.GetId() == runner.GetToken().GetId() {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("list %v", list)
	}

	// A minted operator token works, then is refused once revoked (authn
	// caches for a couple of seconds: poll with a deadline).
	op := must[*guardv1.CreateTokenResponse](t)(r.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_OPERATOR, Name: "ci"}))
	minted := testserver.ClientsFor(srv.Conn(t, op.GetSecret(), "")).Registry
	if _, err := minted.ListGroups(ctx, &guardv1.ListGroupsRequest{}); err != nil {
		t.Fatalf("fresh operator token: %v", err)
	}
	must[*guardv1.RevokeTokenResponse](t)(r.RevokeToken(ctx, &guardv1.RevokeTokenRequest{Id: op.GetToken().GetId()}))
	must[*guardv1.RevokeTokenResponse](t)(r.RevokeToken(ctx, &guardv1.RevokeTokenRequest{Id: op.GetToken().GetId()}))
	testserver.Eventually(t, 10*time.Second, "the revoked token to be refused", func() bool {
		_, err := minted.ListGroups(ctx, &guardv1.ListGroupsRequest{})
		return status.Code(err) == codes.Unauthenticated
	})
	for _, tok := range must[*guardv1.ListTokensResponse](t)(r.ListTokens(ctx, &guardv1.ListTokensRequest{})).GetTokens() {
		if tok.GetId() == op.GetToken().GetId() && tok.GetRevokedAt() == nil {
			t.Fatal("revoked token listed without revoked_at")
		}
	}
	_, err := r.RevokeToken(ctx, &guardv1.RevokeTokenRequest{Id: "tok_nope"})
	wantCode(t, err, codes.NotFound, "")
}

func TestRunnersAndDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()
	exec(t, srv, `INSERT INTO runners (id, host, capabilities, labels, delivery_actions, lease_expires_at) VALUES
		('r-live', 'h1', '{docker}', '{"zone": "a"}', '[{"name": "send_message", "catalog_action": "a2a.send"}]', now() + interval '1 minute'),
		('r-dead', 'h2', '{}', '{}', '[]', now() - interval '1 minute')`)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', $1, 'r-live'), ('s2', $1, 'r-live')`, g)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id, runner_id, status) VALUES ('s3', $1, 'r-live', 'stopped')`, g)
	runners := must[*guardv1.ListRunnersResponse](t)(r.ListRunners(ctx, &guardv1.ListRunnersRequest{})).GetRunners()
	if len(runners) != 2 {
		t.Fatalf("runners %v", runners)
	}
	live, dead := runners[1], runners[0]
	if !live.GetLive() || live.GetSessions() != 2 || live.GetLabels()["zone"] != "a" || len(live.GetDeliveryActions()) != 1 ||
		live.GetDeliveryActions()[0].GetCatalogAction() != "a2a.send" || live.GetCapabilities()[0] != "docker" {
		t.Fatalf("live runner %v", live)
	}
	if dead.GetLive() || dead.GetSessions() != 0 {
		t.Fatalf("dead runner %v", dead)
	}

	// The guard logs live decisions too (every operator call): assert on
	// the rows inserted here, picked out by filters.
	exec(t, srv, `INSERT INTO decisions (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, latency_us) VALUES
		('d1', now() - interval '2 hours', 'test.send', '{"agent": {"agent_group_id": "`+g+`", "session_id": "s1"}}', 'agent', $1, 's1', 'allow', 'ok', 120),
		('d2', now() - interval '1 hour', 'test.send', '{"agent": {"agent_group_id": "`+g+`", "session_id": "s1"}}', 'agent', $1, 's1', 'deny', 'no destination', 80),
		('d3', now(), 'test.host', '{"host": {}}', 'host', NULL, NULL, 'allow', 'host', 10)`, g)
	ids := func(req *guardv1.ListDecisionsRequest) []string {
		out := []string{}
		for _, d := range must[*guardv1.ListDecisionsResponse](t)(r.ListDecisions(ctx, req)).GetDecisions() {
			if d.GetAction() == "test.send" || d.GetAction() == "test.host" {
				out = append(out, d.GetId())
			}
		}
		return out
	}
	if got := ids(&guardv1.ListDecisionsRequest{}); !slices.Equal(got, []string{"d3", "d2", "d1"}) {
		t.Fatalf("newest first: %v", got)
	}
	sent := must[*guardv1.ListDecisionsResponse](t)(r.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Action: "test.send"})).GetDecisions()
	if len(sent) != 2 || sent[1].GetActor().GetAgent().GetSessionId() != "s1" || sent[1].GetLatency().AsDuration() != 120*time.Microsecond ||
		sent[0].GetEffect() != guardv1.Effect_EFFECT_DENY || sent[0].GetReason() != "no destination" {
		t.Fatalf("decisions %v", sent)
	}
	for _, tc := range []struct {
		req  *guardv1.ListDecisionsRequest
		want []string
	}{
		{&guardv1.ListDecisionsRequest{Effect: guardv1.Effect_EFFECT_DENY}, []string{"d2"}},
		{&guardv1.ListDecisionsRequest{Action: "test.host"}, []string{"d3"}},
		{&guardv1.ListDecisionsRequest{Group: g, Limit: 1}, []string{"d2"}},
		{&guardv1.ListDecisionsRequest{Group: g, Since: timestamppb.New(time.Now().Add(-90 * time.Minute))}, []string{"d2"}},
		{&guardv1.ListDecisionsRequest{Group: g}, []string{"d2", "d1"}},
	} {
		if got := ids(tc.req); !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.req, got, tc.want)
		}
	}
	_, err := r.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Effect: 8})
	wantCode(t, err, codes.InvalidArgument, "effect")
	_, err = r.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Limit: -1})
	wantCode(t, err, codes.InvalidArgument, "limit")
}

// An agent (a runner acting for one of its sessions) reads only its own
// group: another group's group or session reads as NotFound.
func TestAgentCallerSeesOnlyItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "mine"})).GetGroup().GetId()
	h := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "theirs"})).GetGroup().GetId()
	exec(t, srv, `INSERT INTO runners (id, lease_expires_at) VALUES ('r1', now() + interval '1 minute')`)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s-mine', $1, 'r1'), ('s-theirs', $2, 'r1')`, g, h)
	exec(t, srv, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ($1, 'peer', $2), ($2, 'peer', $1)`, g, h)
	agent := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s-mine")).Registry

	groups := must[*guardv1.ListGroupsResponse](t)(agent.ListGroups(ctx, &guardv1.ListGroupsRequest{})).GetGroups()
	if len(groups) != 1 || groups[0].GetId() != g {
		t.Fatalf("agent sees groups %v", groups)
	}
	must[*guardv1.GetGroupResponse](t)(agent.GetGroup(ctx, &guardv1.GetGroupRequest{Id: g}))
	// The guard interceptor may refuse the cross-group argument before the
	// handler runs (PermissionDenied); past it, the handler says NotFound.
	_, err := agent.GetGroup(ctx, &guardv1.GetGroupRequest{Id: h})
	notVisible(t, err)
	sessions := must[*guardv1.ListSessionsResponse](t)(agent.ListSessions(ctx, &guardv1.ListSessionsRequest{})).GetSessions()
	if len(sessions) != 1 || sessions[0].GetId() != "s-mine" {
		t.Fatalf("agent sees sessions %v", sessions)
	}
	_, err = agent.GetSession(ctx, &guardv1.GetSessionRequest{Id: "s-theirs"})
	notVisible(t, err)
	_, err = agent.GetSessionHistory(ctx, &guardv1.GetSessionHistoryRequest{Id: "s-theirs"})
	notVisible(t, err)
	must[*guardv1.GetSessionResponse](t)(agent.GetSession(ctx, &guardv1.GetSessionRequest{Id: "s-mine"}))
	ds := must[*guardv1.ListDestinationsResponse](t)(agent.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: g})).GetDestinations()
	if len(ds) != 1 || ds[0].GetGroup() != g {
		t.Fatalf("agent sees destinations %v", ds)
	}
	_, err = agent.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: h})
	notVisible(t, err)

	// A runner without a session header reads nothing here.
	bare := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "")).Registry
	_, err = bare.ListGroups(ctx, &guardv1.ListGroupsRequest{})
	if code := status.Code(err); code != codes.PermissionDenied {
		t.Fatalf("bare runner: %v", err)
	}
}

func notVisible(t *testing.T, err error) {
	t.Helper()
	if code := status.Code(err); code != codes.NotFound && code != codes.PermissionDenied {
		t.Fatalf("want NotFound (or the guard's PermissionDenied), got %v", err)
	}
}

// The handlers' own read scoping, called directly with a caller in the
// context (the guard interceptor in front may refuse some of these calls
// earlier; this is the second fence). Users read what their roles allow:
// owners everything, a scoped admin its groups, anyone their own record;
// agents their own group unless their cli_scope is global.
func TestReadScopingByCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	res := srv.Deps().Resources
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()
	h := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "h", CliScope: guardv1.CliScope_CLI_SCOPE_GLOBAL})).GetGroup().GetId()
	exec(t, srv, `INSERT INTO users (id) VALUES ('tg:admin'), ('tg:owner'), ('tg:nobody')`)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id) VALUES ('s-g', $1), ('s-h', $2)`, g, h)
	must[*guardv1.GrantRoleResponse](t)(r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:admin", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: g}))
	must[*guardv1.GrantRoleResponse](t)(r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:owner", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}))
	user := func(id string) context.Context {
		return authn.WithCaller(ctx, authn.Caller{Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_USER, UserID: id}})
	}
	agent := func(group, session string) context.Context {
		return authn.WithCaller(ctx, authn.Caller{Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_RUNNER, RunnerID: "r1"},
			Agent: &authn.Agent{GroupID: group, SessionID: session}})
	}
	groupsOf := func(ctx context.Context) int {
		return len(must[*guardv1.ListGroupsResponse](t)(res.ListGroups(ctx, &guardv1.ListGroupsRequest{})).GetGroups())
	}

	if n := groupsOf(user("tg:owner")); n != 2 {
		t.Fatalf("owner sees %d groups", n)
	}
	if n := groupsOf(user("tg:admin")); n != 1 {
		t.Fatalf("scoped admin sees %d groups", n)
	}
	if n := groupsOf(user("tg:nobody")); n != 0 {
		t.Fatalf("user without roles sees %d groups", n)
	}
	_, err := res.GetGroup(user("tg:admin"), &guardv1.GetGroupRequest{Id: h})
	wantCode(t, err, codes.NotFound, "")
	if us := must[*guardv1.ListUsersResponse](t)(res.ListUsers(user("tg:admin"), &guardv1.ListUsersRequest{})).GetUsers(); len(us) != 1 || us[0].GetId() != "tg:admin" {
		t.Fatalf("scoped admin sees users %v", us)
	}
	if us := must[*guardv1.ListUsersResponse](t)(res.ListUsers(user("tg:owner"), &guardv1.ListUsersRequest{})).GetUsers(); len(us) != 3 {
		t.Fatalf("owner sees users %v", us)
	}
	_, err = res.GetUser(user("tg:admin"), &guardv1.GetUserRequest{Id: "tg:owner"})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = res.ListRunners(user("tg:admin"), &guardv1.ListRunnersRequest{})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = res.ListTokens(user("tg:owner"), &guardv1.ListTokensRequest{})
	if err != nil {
		t.Fatalf("owner lists tokens: %v", err)
	}
	if rs := must[*guardv1.ListRolesResponse](t)(res.ListRoles(user("tg:nobody"), &guardv1.ListRolesRequest{})).GetRoles(); len(rs) != 0 {
		t.Fatalf("user without roles sees grants %v", rs)
	}
	if rs := must[*guardv1.ListRolesResponse](t)(res.ListRoles(user("tg:admin"), &guardv1.ListRolesRequest{})).GetRoles(); len(rs) != 1 {
		t.Fatalf("scoped admin sees grants %v", rs)
	}

	// Agents: group scope sees its group only, another group's rows read as NotFound.
	if n := groupsOf(agent(g, "s-g")); n != 1 {
		t.Fatalf("group-scoped agent sees %d groups", n)
	}
	_, err = res.GetGroup(agent(g, "s-g"), &guardv1.GetGroupRequest{Id: h})
	wantCode(t, err, codes.NotFound, "")
	_, err = res.GetSession(agent(g, "s-g"), &guardv1.GetSessionRequest{Id: "s-h"})
	wantCode(t, err, codes.NotFound, "")
	_, err = res.GetGroupConfig(agent(g, "s-g"), &guardv1.GetGroupConfigRequest{Group: h})
	wantCode(t, err, codes.NotFound, "")
	_, err = res.ListMembers(agent(g, "s-g"), &guardv1.ListMembersRequest{Group: h})
	wantCode(t, err, codes.NotFound, "")
	// cli_scope global reads everything.
	if n := groupsOf(agent(h, "s-h")); n != 2 {
		t.Fatalf("global agent sees %d groups", n)
	}
	must[*guardv1.GetSessionResponse](t)(res.GetSession(agent(h, "s-h"), &guardv1.GetSessionRequest{Id: "s-g"}))

	// A runner without an agent, or a bridge, reads nothing here.
	_, err = res.ListGroups(authn.WithCaller(ctx, authn.Caller{Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_RUNNER, RunnerID: "r1"}}), &guardv1.ListGroupsRequest{})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = res.ListGroups(ctx, &guardv1.ListGroupsRequest{})
	wantCode(t, err, codes.Unauthenticated, "")

	// Writes are not for user tokens (the rule's principals), over gRPC.
	owner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "tg:owner"), "")).Registry
	_, err = owner.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "x"})
	wantCode(t, err, codes.PermissionDenied, "")
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c := start(t)
	resp := must[*guardv1.ListCatalogResponse](t)(c.Registry.ListCatalog(ctx, &guardv1.ListCatalogRequest{}))
	var groupsCreate *guardv1.CatalogEntry
	for i, e := range resp.GetEntries() {
		if i > 0 && resp.GetEntries()[i-1].GetAction() >= e.GetAction() {
			t.Fatalf("catalog not sorted at %q", e.GetAction())
		}
		if e.GetAction() == "groups.create" {
			groupsCreate = e
		}
	}
	if groupsCreate == nil || groupsCreate.GetAccess() != guardv1.Access_ACCESS_APPROVAL || groupsCreate.GetResource() != "groups" {
		t.Fatalf("groups.create entry %v", groupsCreate)
	}
	if !slices.Contains(resp.GetExemptDeliveryActions(), "cli_request") {
		t.Fatalf("exempt list %v", resp.GetExemptDeliveryActions())
	}
}
