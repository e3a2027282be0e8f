package guardtest

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A user token reads what its roles allow over gRPC, and nothing else: a
// scoped admin of one group lists that group only, cannot read group-less
// resources, and cannot mutate anything.
func TestUserTokenReadsWhatItsRolesAllow(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	op := srv.Operator(t)
	mk := func(name string) string {
		res, err := op.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetGroup().GetId()
	}
	mine, other := mk("mine"), mk("other")
	tok := srv.Token(t, "user", "", "telegram:dana")
	if _, err := op.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "telegram:dana", Role: guardv1.Role_ROLE_ADMIN,
		Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: mine}); err != nil {
		t.Fatal(err)
	}
	dana := testserver.ClientsFor(srv.Conn(t, tok, ""))

	list, err := dana.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{})
	if err != nil {
		t.Fatalf("a scoped admin's read must be allowed: %v", err)
	}
	if len(list.GetGroups()) != 1 || list.GetGroups()[0].GetId() != mine {
		t.Fatalf("scoped admin sees %v, want only %s", list.GetGroups(), mine)
	}
	if _, err := dana.Registry.GetGroup(ctx, &guardv1.GetGroupRequest{Id: other}); status.Code(err) != codes.NotFound {
		t.Fatalf("another group must read as NotFound, got %v", err)
	}
	if _, err := dana.Registry.ListRunners(ctx, &guardv1.ListRunnersRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("group-less reads need global rights, got %v", err)
	}
	if _, err := dana.Registry.AddMember(ctx, &guardv1.AddMemberRequest{Group: mine, UserId: "telegram:dana"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a user token must not mutate, got %v", err)
	}
	if _, err := dana.Registry.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_USER}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("tokens are operator-only, got %v", err)
	}
}
