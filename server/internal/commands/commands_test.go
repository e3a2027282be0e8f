package commands

import (
	"slices"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// Declaration is registration: every admin RPC has its entry, approval-access
// RPCs hold through cli_command, open ones can never be satisfied by a grant.
func TestEveryAdminRPCHasItsEntry(t *testing.T) {
	cat := guard.NewCatalog()
	if err := Register(cat); err != nil {
		t.Fatal(err)
	}
	methods := rpcdecl.AdminMethods(rpcdecl.Services...)
	if len(methods) < 40 {
		t.Fatalf("only %d admin RPCs found", len(methods))
	}
	for _, m := range methods {
		e, ok := cat.Lookup(m.Rule.GetAction())
		if !ok {
			t.Errorf("%s: action %s not in the catalog", m.FullMethod, m.Rule.GetAction())
			continue
		}
		wantApproval := ""
		if m.Rule.GetAccess() == guardv1.Access_ACCESS_APPROVAL {
			wantApproval = ApprovalAction
		}
		if e.ApprovalAction != wantApproval {
			t.Errorf("%s: approval action %q, want %q", m.FullMethod, e.ApprovalAction, wantApproval)
		}
	}
	// A second registration of the same RPCs is refused.
	if err := Register(cat); err == nil {
		t.Fatal("registering the admin RPCs twice succeeded")
	}
}

func TestApproverScopeFor(t *testing.T) {
	g, gl := guardv1.ApproverScope_APPROVER_SCOPE_GROUP, guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL
	cases := []struct {
		method string
		args   map[string]any
		want   guardv1.ApproverScope
	}{
		{"/guard.v1.Registry/GrantRole", map[string]any{"user_id": "telegram:mallory", "role": "ROLE_OWNER"}, gl},
		{"/guard.v1.Registry/AddMember", map[string]any{"user_id": "telegram:new"}, g},
		{"/guard.v1.Registry/AddMember", map[string]any{"group": "g1"}, g},
		{"/guard.v1.Registry/AddMember", map[string]any{"group": "g2"}, gl},
		{"/guard.v1.Registry/UpdateGroup", map[string]any{"id": "g2"}, gl},
		{"/guard.v1.Registry/UpdateGroup", map[string]any{"id": "g1"}, g},
		{"/guard.v1.Registry/DeleteGroup", map[string]any{"id": "g2"}, gl},
		// The finding: the target of a destination names a group too.
		{"/guard.v1.Registry/AddDestination", map[string]any{"group": "g1", "name": "b", "target_group": "g2"}, gl},
		{"/guard.v1.Registry/AddDestination", map[string]any{"group": "g1", "name": "self", "target_group": "g1"}, g},
		{"/guard.v1.Registry/AddDestination", map[string]any{"group": "g1", "name": "chat", "target_messaging_group": "mg-9"}, g},
		{"/guard.v1.Registry/AddDestination", map[string]any{"group": "g1", "target_group": []any{"g2"}}, gl}, // forged shape
		{"/guard.v1.Registry/ListSessions", map[string]any{"runner_id": "r9"}, g},
	}
	for _, c := range cases {
		r := rpcdecl.For(c.method)
		if got := ApproverScopeFor(r.GetResource(), rpcdecl.MethodGroupFields(c.method), c.args, "g1"); got != c.want {
			t.Errorf("%s %v: %v, want %v", c.method, c.args, got, c.want)
		}
	}
}

// Every field of every admin RPC request whose name reads like a group
// reference has decided whether it names an agent group: a new RPC (or a
// new field) that forgets fails here and at boot, instead of being held at
// group scope while it reaches another group.
func TestEveryGroupLikeFieldIsDecided(t *testing.T) {
	methods := rpcdecl.AdminMethods(rpcdecl.Services...)
	marked := 0
	for _, m := range methods {
		if p := rpcdecl.Problems(m.FullMethod); len(p) != 0 {
			t.Errorf("%v", p)
		}
		marked += len(rpcdecl.MethodGroupFields(m.FullMethod))
	}
	if marked < 25 {
		t.Fatalf("only %d marked group fields across %d admin RPCs: marks not read?", marked, len(methods))
	}
	if got := rpcdecl.MethodGroupFields("/guard.v1.Registry/AddDestination"); !slices.Equal(got, []string{"group", "target_group"}) {
		t.Fatalf("AddDestination group fields = %v, want [group target_group]", got)
	}
	// The check's teeth: a request type with an unmarked group-like field.
	if got := rpcdecl.UndecidedGroupFields((&guardv1.Destination{}).ProtoReflect().Descriptor()); len(got) == 0 {
		t.Fatal("Destination's unmarked group fields were not reported")
	}
}
