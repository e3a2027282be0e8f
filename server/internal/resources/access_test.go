package resources_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
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

	// The new user token works, then is refused once revoked (authn caches
	// for a couple of seconds: poll with a deadline).
	dana := testserver.ClientsFor(srv.Conn(t, user.GetSecret(), "")).Registry
	if _, err := dana.ListGroups(ctx, &guardv1.ListGroupsRequest{}); err != nil {
		t.Fatalf("fresh user token: %v", err)
	}
	must[*guardv1.RevokeTokenResponse](t)(r.RevokeToken(ctx, &guardv1.RevokeTokenRequest{Id: user.GetToken().GetId()}))
	must[*guardv1.RevokeTokenResponse](t)(r.RevokeToken(ctx, &guardv1.RevokeTokenRequest{Id: user.GetToken().GetId()}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := dana.ListGroups(ctx, &guardv1.ListGroupsRequest{})
		if status.Code(err) == codes.Unauthenticated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked token still accepted: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tok := range must[*guardv1.ListTokensResponse](t)(r.ListTokens(ctx, &guardv1.ListTokensRequest{})).GetTokens() {
		if tok.GetId() == user.GetToken().GetId() && tok.GetRevokedAt() == nil {
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

	exec(t, srv, `INSERT INTO decisions (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason, latency_us) VALUES
		('d1', now() - interval '2 hours', 'a2a.send', '{"agent": {"agent_group_id": "`+g+`", "session_id": "s1"}}', 'agent', $1, 's1', 'allow', 'ok', 120),
		('d2', now() - interval '1 hour', 'a2a.send', '{"agent": {"agent_group_id": "`+g+`", "session_id": "s1"}}', 'agent', $1, 's1', 'deny', 'no destination', 80),
		('d3', now(), 'groups.create', '{"host": {}}', 'host', NULL, NULL, 'allow', 'host', 10)`, g)
	all := must[*guardv1.ListDecisionsResponse](t)(r.ListDecisions(ctx, &guardv1.ListDecisionsRequest{})).GetDecisions()
	if len(all) != 3 || all[0].GetId() != "d3" || all[2].GetId() != "d1" {
		t.Fatalf("decisions %v", all)
	}
	if all[2].GetActor().GetAgent().GetSessionId() != "s1" || all[2].GetLatency().AsDuration() != 120*time.Microsecond || all[0].GetActor().GetHost() == nil {
		t.Fatalf("decision %v", all[2])
	}
	for _, tc := range []struct {
		req  *guardv1.ListDecisionsRequest
		want []string
	}{
		{&guardv1.ListDecisionsRequest{Effect: guardv1.Effect_EFFECT_DENY}, []string{"d2"}},
		{&guardv1.ListDecisionsRequest{Action: "a2a.send"}, []string{"d2", "d1"}},
		{&guardv1.ListDecisionsRequest{Group: g, Limit: 1}, []string{"d2"}},
		{&guardv1.ListDecisionsRequest{Since: timestamppb.New(time.Now().Add(-90 * time.Minute))}, []string{"d3", "d2"}},
	} {
		got := must[*guardv1.ListDecisionsResponse](t)(r.ListDecisions(ctx, tc.req)).GetDecisions()
		ids := []string{}
		for _, d := range got {
			ids = append(ids, d.GetId())
		}
		if len(ids) != len(tc.want) || (len(ids) > 0 && ids[0] != tc.want[0]) || ids[len(ids)-1] != tc.want[len(tc.want)-1] {
			t.Errorf("%v: got %v, want %v", tc.req, ids, tc.want)
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
	_, err := agent.GetGroup(ctx, &guardv1.GetGroupRequest{Id: h})
	wantCode(t, err, codes.NotFound, "")
	sessions := must[*guardv1.ListSessionsResponse](t)(agent.ListSessions(ctx, &guardv1.ListSessionsRequest{})).GetSessions()
	if len(sessions) != 1 || sessions[0].GetId() != "s-mine" {
		t.Fatalf("agent sees sessions %v", sessions)
	}
	_, err = agent.GetSession(ctx, &guardv1.GetSessionRequest{Id: "s-theirs"})
	wantCode(t, err, codes.NotFound, "")
	_, err = agent.GetSessionHistory(ctx, &guardv1.GetSessionHistoryRequest{Id: "s-theirs"})
	wantCode(t, err, codes.NotFound, "")
	must[*guardv1.GetSessionResponse](t)(agent.GetSession(ctx, &guardv1.GetSessionRequest{Id: "s-mine"}))
	ds := must[*guardv1.ListDestinationsResponse](t)(agent.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: g})).GetDestinations()
	if len(ds) != 1 || ds[0].GetGroup() != g {
		t.Fatalf("agent sees destinations %v", ds)
	}
	_, err = agent.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: h})
	if code := status.Code(err); code != codes.NotFound && code != codes.PermissionDenied {
		t.Fatalf("another group's destinations: %v", err)
	}

	// A runner without a session header reads nothing here.
	bare := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "")).Registry
	_, err = bare.ListGroups(ctx, &guardv1.ListGroupsRequest{})
	if code := status.Code(err); code != codes.PermissionDenied {
		t.Fatalf("bare runner: %v", err)
	}
}

// User tokens read what their roles allow: owners everything, a scoped
// admin its groups, anyone their own record.
func TestUserCallerReadsByRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()
	must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "h"}))
	admin := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "tg:admin"), "")).Registry
	owner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "tg:owner"), "")).Registry
	nobody := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "tg:nobody"), "")).Registry
	must[*guardv1.GrantRoleResponse](t)(r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:admin", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: g}))
	must[*guardv1.GrantRoleResponse](t)(r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:owner", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}))

	if gs := must[*guardv1.ListGroupsResponse](t)(owner.ListGroups(ctx, &guardv1.ListGroupsRequest{})).GetGroups(); len(gs) != 2 {
		t.Fatalf("owner sees %v", gs)
	}
	if gs := must[*guardv1.ListGroupsResponse](t)(admin.ListGroups(ctx, &guardv1.ListGroupsRequest{})).GetGroups(); len(gs) != 1 || gs[0].GetId() != g {
		t.Fatalf("scoped admin sees %v", gs)
	}
	if gs := must[*guardv1.ListGroupsResponse](t)(nobody.ListGroups(ctx, &guardv1.ListGroupsRequest{})).GetGroups(); len(gs) != 0 {
		t.Fatalf("user without roles sees %v", gs)
	}
	if us := must[*guardv1.ListUsersResponse](t)(admin.ListUsers(ctx, &guardv1.ListUsersRequest{})).GetUsers(); len(us) != 1 || us[0].GetId() != "tg:admin" {
		t.Fatalf("scoped admin sees users %v", us)
	}
	if us := must[*guardv1.ListUsersResponse](t)(owner.ListUsers(ctx, &guardv1.ListUsersRequest{})).GetUsers(); len(us) != 3 {
		t.Fatalf("owner sees users %v", us)
	}
	_, err := admin.GetUser(ctx, &guardv1.GetUserRequest{Id: "tg:owner"})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = admin.ListRunners(ctx, &guardv1.ListRunnersRequest{})
	wantCode(t, err, codes.PermissionDenied, "")
	if rs := must[*guardv1.ListRolesResponse](t)(nobody.ListRoles(ctx, &guardv1.ListRolesRequest{})).GetRoles(); len(rs) != 0 {
		t.Fatalf("user without roles sees grants %v", rs)
	}
	// Writes are not for user tokens (the rule's principals).
	_, err = owner.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "x"})
	wantCode(t, err, codes.PermissionDenied, "")
}
