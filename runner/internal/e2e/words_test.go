package e2e

import (
	"context"
	"strings"
	"testing"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 42: the agent read "an admin of agent group ag_…", "rejected by
// admin" whoever rejected, and "mcp_call approved". It reads who may
// approve, by name; who rejected, by name, and why; what was approved — the
// tool and its arguments — and by whom, then the result.
func TestTheAgentIsToldWhoAndWhat(t *testing.T) {
	s := startServer(t)
	w := newMCPWorldOn(t, s, "process", runnerOpts{})
	ctx := context.Background()
	if _, err := s.op.registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "telegram:dana", DisplayName: "Dana"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "telegram:dana", Role: guardv1.Role_ROLE_ADMIN,
		Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: w.group}); err != nil {
		t.Fatal(err)
	}

	held := w.call(t, "write_file", map[string]any{"path": "w.txt", "content": "words"})
	if held.GetStatus() != agentv1.SendStatus_SEND_STATUS_HELD || !strings.HasPrefix(held.GetApprovers(), "Dana (telegram:dana)") {
		t.Fatalf("held: approvers %q, want Dana named first (%v)", held.GetApprovers(), held)
	}
	s.approve(t, held.GetHoldId(), "telegram:dana")
	approved := waitEvent(t, w.sess, "the APPROVED notice", func(e event) bool {
		return e.s("kind") == "APPROVED" && e.s("hold_id") == held.GetHoldId()
	})
	if txt := approved.s("text"); !strings.Contains(txt, "approved by Dana (telegram:dana)") || !strings.Contains(txt, "fs.write_file") ||
		!strings.Contains(txt, `"path":"w.txt"`) {
		t.Fatalf("approved notice %q, want who approved which tool with which arguments", txt)
	}
	waitEvent(t, w.sess, "the result", func(e event) bool {
		return e.s("kind") == "RESULT" && e.s("hold_id") == held.GetHoldId() && strings.Contains(e.s("text"), "wrote 5 bytes")
	})

	again := w.call(t, "write_file", map[string]any{"path": "x.txt", "content": "no"})
	if _, err := s.op.approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: again.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_REJECT,
		AsUser: "telegram:dana", Reason: "not that file"}); err != nil {
		t.Fatal(err)
	}
	rejected := waitEvent(t, w.sess, "the REJECTED notice", func(e event) bool {
		return e.s("kind") == "REJECTED" && e.s("hold_id") == again.GetHoldId()
	})
	if txt := rejected.s("text"); !strings.Contains(txt, "rejected by Dana (telegram:dana)") || !strings.Contains(txt, `"not that file"`) ||
		!strings.Contains(txt, "fs.write_file") {
		t.Fatalf("rejected notice %q, want by whom, why and what", txt)
	}
}
