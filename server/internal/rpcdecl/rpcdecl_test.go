package rpcdecl

import (
	"testing"

	"google.golang.org/grpc"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Every method of every control-plane service declares a complete rule.
func TestEveryMethodDeclaresItsRule(t *testing.T) {
	srv := grpc.NewServer()
	guardv1.RegisterGuardServer(srv, guardv1.UnimplementedGuardServer{})
	guardv1.RegisterApprovalsServer(srv, guardv1.UnimplementedApprovalsServer{})
	guardv1.RegisterRegistryServer(srv, guardv1.UnimplementedRegistryServer{})
	if missing := Check(srv); len(missing) != 0 {
		t.Fatalf("methods without a complete rule:\n%v", missing)
	}
	if r := For("/guard.v1.Registry/GrantRole"); r.GetAction() != "roles.grant" || r.GetAccess() != guardv1.Access_ACCESS_APPROVAL {
		t.Fatalf("GrantRole rule = %v", r)
	}
	if len(AdminMethods(Services...)) < 40 {
		t.Fatalf("admin methods = %d, want the full resource set", len(AdminMethods(Services...)))
	}
}

// A service registered without options is caught (the boot check's teeth).
func TestCheckCatchesUndeclaredMethods(t *testing.T) {
	if got := Problems("/guard.v1.Nope/Missing"); len(got) != 1 {
		t.Fatalf("want one problem for an undeclared method, got %v", got)
	}
	if !Exempt("/grpc.health.v1.Health/Check") || Exempt("/guard.v1.Guard/Decide") {
		t.Fatal("exemption wrong")
	}
}
