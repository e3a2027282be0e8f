package commands

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/rules"
)

// Declaration is registration: every admin RPC has its entry, approval-access
// RPCs hold through cli_command, open ones can never be satisfied by a grant.
func TestEveryAdminRPCHasItsEntry(t *testing.T) {
	cat := guard.NewCatalog()
	if err := Register(cat); err != nil {
		t.Fatal(err)
	}
	methods := rules.AdminMethods(rules.Services...)
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
		resource string
		args     map[string]any
		want     guardv1.ApproverScope
	}{
		{"roles", map[string]any{"user_id": "telegram:mallory", "role": "ROLE_OWNER"}, gl},
		{"", map[string]any{}, gl},
		{"members", map[string]any{"user_id": "telegram:new"}, g},
		{"members", map[string]any{"group": "g1"}, g},
		{"members", map[string]any{"group": "g2"}, gl},
		{"groups", map[string]any{"id": "g2"}, gl},
		{"groups", map[string]any{"id": "g1"}, g},
		{"sessions", map[string]any{"id": "s9"}, g}, // id is not a group for sessions
		{"destinations", map[string]any{"agent_group_id": "g2"}, gl},
	}
	for _, c := range cases {
		if got := ApproverScopeFor(c.resource, c.args, "g1"); got != c.want {
			t.Errorf("%s %v: %v, want %v", c.resource, c.args, got, c.want)
		}
	}
}
