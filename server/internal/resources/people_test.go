package resources_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestUsersRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c := start(t)
	r := c.Registry
	u := must[*guardv1.CreateUserResponse](t)(r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "tg:dana", DisplayName: "Dana"})).GetUser()
	if u.GetId() != "tg:dana" || u.GetDisplayName() != "Dana" || u.GetCreatedAt() == nil {
		t.Fatalf("created %v", u)
	}
	got := must[*guardv1.GetUserResponse](t)(r.GetUser(ctx, &guardv1.GetUserRequest{Id: "tg:dana"})).GetUser()
	if got.GetDisplayName() != "Dana" {
		t.Fatalf("get %v", got)
	}
	up := must[*guardv1.UpdateUserResponse](t)(r.UpdateUser(ctx, &guardv1.UpdateUserRequest{Id: "tg:dana", DisplayName: "Dana S"})).GetUser()
	if up.GetDisplayName() != "Dana S" {
		t.Fatalf("update %v", up)
	}
	must[*guardv1.CreateUserResponse](t)(r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "slack:U1"}))
	list := must[*guardv1.ListUsersResponse](t)(r.ListUsers(ctx, &guardv1.ListUsersRequest{})).GetUsers()
	if len(list) != 2 || list[0].GetId() != "slack:U1" {
		t.Fatalf("list %v", list)
	}
	_, err := r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "tg:dana"})
	wantCode(t, err, codes.AlreadyExists, "")
	for _, bad := range []string{"", "dana", "TG:dana", "tg:", "tg:da na"} {
		_, err = r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: bad})
		wantCode(t, err, codes.InvalidArgument, "id")
	}
	_, err = r.GetUser(ctx, &guardv1.GetUserRequest{Id: "tg:nobody"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.UpdateUser(ctx, &guardv1.UpdateUserRequest{Id: "tg:nobody", DisplayName: "x"})
	wantCode(t, err, codes.NotFound, "")
}

func TestRolesExplicitScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c := start(t)
	r := c.Registry
	must[*guardv1.CreateUserResponse](t)(r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "tg:dana"}))
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()

	// Never a silent global grant: the scope must be named, and must match the group.
	for _, tc := range []struct {
		req   *guardv1.GrantRoleRequest
		field string
	}{
		{&guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN}, "scope"},
		{&guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN, Group: g}, "scope"},
		{&guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP}, "group"},
		{&guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL, Group: g}, "group"},
		{&guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: g}, "scope"},
		{&guardv1.GrantRoleRequest{UserId: "tg:dana", Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}, "role"},
		{&guardv1.GrantRoleRequest{UserId: "tg:dana", Role: 7, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}, "role"},
		{&guardv1.GrantRoleRequest{Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}, "user_id"},
	} {
		_, err := r.GrantRole(ctx, tc.req)
		wantCode(t, err, codes.InvalidArgument, tc.field)
	}
	if roles := must[*guardv1.ListRolesResponse](t)(r.ListRoles(ctx, &guardv1.ListRolesRequest{})).GetRoles(); len(roles) != 0 {
		t.Fatalf("refused grants left rows: %v", roles)
	}

	scoped := must[*guardv1.GrantRoleResponse](t)(r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: g})).GetGrant()
	if scoped.GetScope() != guardv1.RoleScope_ROLE_SCOPE_GROUP || scoped.GetGroup() != g {
		t.Fatalf("grant %v", scoped)
	}
	owner := must[*guardv1.GrantRoleResponse](t)(r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL})).GetGrant()
	if owner.GetScope() != guardv1.RoleScope_ROLE_SCOPE_GLOBAL || owner.GetGroup() != "" {
		t.Fatalf("grant %v", owner)
	}
	_, err := r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:nobody", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: "ag_nope"})
	wantCode(t, err, codes.NotFound, "")

	byGroup := must[*guardv1.ListRolesResponse](t)(r.ListRoles(ctx, &guardv1.ListRolesRequest{Group: g})).GetRoles()
	if len(byGroup) != 1 || byGroup[0].GetRole() != guardv1.Role_ROLE_ADMIN {
		t.Fatalf("by group %v", byGroup)
	}
	if all := must[*guardv1.ListRolesResponse](t)(r.ListRoles(ctx, &guardv1.ListRolesRequest{UserId: "tg:dana"})).GetRoles(); len(all) != 2 {
		t.Fatalf("by user %v", all)
	}
	// Revoking the global owner leaves the scoped admin grant.
	must[*guardv1.RevokeRoleResponse](t)(r.RevokeRole(ctx, &guardv1.RevokeRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}))
	_, err = r.RevokeRole(ctx, &guardv1.RevokeRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.RevokeRole(ctx, &guardv1.RevokeRoleRequest{UserId: "tg:dana", Role: guardv1.Role_ROLE_ADMIN})
	wantCode(t, err, codes.InvalidArgument, "scope")
	if left := must[*guardv1.ListRolesResponse](t)(r.ListRoles(ctx, &guardv1.ListRolesRequest{})).GetRoles(); len(left) != 1 || left[0].GetGroup() != g {
		t.Fatalf("left %v", left)
	}
}

func TestMembersAndDestinations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()
	h := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "h"})).GetGroup().GetId()
	must[*guardv1.CreateUserResponse](t)(r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "tg:dana"}))
	exec(t, srv, `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('mg_1', 'telegram', '-100')`)

	m := must[*guardv1.AddMemberResponse](t)(r.AddMember(ctx, &guardv1.AddMemberRequest{Group: g, UserId: "tg:dana"})).GetMember()
	if m.GetGroup() != g || m.GetUserId() != "tg:dana" || m.GetAddedAt() == nil {
		t.Fatalf("member %v", m)
	}
	_, err := r.AddMember(ctx, &guardv1.AddMemberRequest{Group: g, UserId: "tg:dana"})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = r.AddMember(ctx, &guardv1.AddMemberRequest{Group: g, UserId: "tg:nobody"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.AddMember(ctx, &guardv1.AddMemberRequest{Group: g})
	wantCode(t, err, codes.InvalidArgument, "user_id")
	if ms := must[*guardv1.ListMembersResponse](t)(r.ListMembers(ctx, &guardv1.ListMembersRequest{Group: g})).GetMembers(); len(ms) != 1 {
		t.Fatalf("members %v", ms)
	}
	_, err = r.ListMembers(ctx, &guardv1.ListMembersRequest{Group: "ag_nope"})
	wantCode(t, err, codes.NotFound, "")
	must[*guardv1.RemoveMemberResponse](t)(r.RemoveMember(ctx, &guardv1.RemoveMemberRequest{Group: g, UserId: "tg:dana"}))
	_, err = r.RemoveMember(ctx, &guardv1.RemoveMemberRequest{Group: g, UserId: "tg:dana"})
	wantCode(t, err, codes.NotFound, "")

	d := must[*guardv1.AddDestinationResponse](t)(r.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: g, Name: "helper", TargetGroup: h})).GetDestination()
	if d.GetTargetGroup() != h || d.GetTargetMessagingGroup() != "" {
		t.Fatalf("destination %v", d)
	}
	must[*guardv1.AddDestinationResponse](t)(r.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: g, Name: "chat", TargetMessagingGroup: "mg_1"}))
	_, err = r.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: g, Name: "chat", TargetGroup: h})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = r.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: g, Name: "both", TargetGroup: h, TargetMessagingGroup: "mg_1"})
	wantCode(t, err, codes.InvalidArgument, "target_group")
	_, err = r.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: g, Name: "ghost", TargetGroup: "ag_nope"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: g, TargetGroup: h})
	wantCode(t, err, codes.InvalidArgument, "name")
	ds := must[*guardv1.ListDestinationsResponse](t)(r.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: g})).GetDestinations()
	if len(ds) != 2 || ds[0].GetName() != "chat" || ds[1].GetName() != "helper" {
		t.Fatalf("destinations %v", ds)
	}
	must[*guardv1.RemoveDestinationResponse](t)(r.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: g, Name: "chat"}))
	_, err = r.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: g, Name: "chat"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.ListDestinations(ctx, &guardv1.ListDestinationsRequest{})
	wantCode(t, err, codes.InvalidArgument, "group")
}

func TestSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()
	exec(t, srv, `INSERT INTO runners (id) VALUES ('r1')`)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', $1, 'r1'), ('s2', $1, NULL)`, g)
	exec(t, srv, `INSERT INTO session_events (session_id, direction, kind, body) VALUES
		('s1', 'in', 'message', '{"text": "one"}'), ('s1', 'out', 'message', '{"text": "two"}'), ('s1', 'out', 'notice', '{"text": "three"}')`)

	if ss := must[*guardv1.ListSessionsResponse](t)(r.ListSessions(ctx, &guardv1.ListSessionsRequest{Group: g})).GetSessions(); len(ss) != 2 {
		t.Fatalf("sessions %v", ss)
	}
	ss := must[*guardv1.ListSessionsResponse](t)(r.ListSessions(ctx, &guardv1.ListSessionsRequest{RunnerId: "r1"})).GetSessions()
	if len(ss) != 1 || ss[0].GetId() != "s1" || ss[0].GetStatus() != guardv1.SessionStatus_SESSION_STATUS_ACTIVE {
		t.Fatalf("sessions %v", ss)
	}
	s := must[*guardv1.GetSessionResponse](t)(r.GetSession(ctx, &guardv1.GetSessionRequest{Id: "s1"})).GetSession()
	if s.GetAgentGroupId() != g || s.GetRunnerId() != "r1" {
		t.Fatalf("session %v", s)
	}
	_, err := r.GetSession(ctx, &guardv1.GetSessionRequest{Id: "nope"})
	wantCode(t, err, codes.NotFound, "")
	ev := must[*guardv1.GetSessionHistoryResponse](t)(r.GetSessionHistory(ctx, &guardv1.GetSessionHistoryRequest{Id: "s1", Limit: 2})).GetEvents()
	if len(ev) != 2 || ev[0].GetBody().GetFields()["text"].GetStringValue() != "two" || ev[1].GetKind() != "notice" {
		t.Fatalf("history %v", ev)
	}
	_, err = r.GetSessionHistory(ctx, &guardv1.GetSessionHistoryRequest{Id: "s1", Limit: -1})
	wantCode(t, err, codes.InvalidArgument, "limit")
}
