package inbound_test

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A chat wired to two agent groups: a stranger already admitted to the
// first is unknown to the second, and that admission is for the second
// group's admins — a scoped admin of the first may not let them in.
func TestSenderAdmissionIsApprovedByTheJoinedGroupsAdmins(t *testing.T) {
	f := newFixture(t)
	f.group("ag-1", "One")
	f.group("ag-2", "Two")
	f.exec(`INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group, unknown_sender_policy)
		VALUES ('mg-chat', 'telegram', 'chat-123', 'Group Chat', true, 'request_approval')`)
	f.exec(`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id, created_at)
		VALUES ('mga-1', 'mg-chat', 'ag-1', now() - interval '1 hour'), ('mga-2', 'mg-chat', 'ag-2', now())`)
	f.user(owner, "owner", "")
	f.user("telegram:adm1", "admin", "ag-1")
	f.user("telegram:adm2", "admin", "ag-2")
	f.user(strangerID, "", "")
	f.exec(`INSERT INTO agent_group_members (agent_group_id, user_id) VALUES ('ag-1', $1)`, strangerID)

	if r := f.route(stranger("hi")); r.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED {
		t.Fatalf("message from ag-1's member: %v, want DELIVERED to ag-1", r)
	}
	hold := f.str(`SELECT id FROM holds WHERE kind = $1 AND payload->>'agent_group_id' = 'ag-2'`, kindAdmit)
	if anchor := f.str(`SELECT COALESCE(agent_group_id, '') FROM holds WHERE id = $1`, hold); anchor != "ag-2" {
		t.Errorf("admission to ag-2 anchored on %q, want ag-2", anchor)
	}
	f.wantDenied(hold, "telegram:adm1", guardv1.Outcome_OUTCOME_APPROVE, "approve")
	if f.isMember(strangerID, "ag-2") {
		t.Fatal("ag-1's scoped admin admitted the stranger into ag-2")
	}
	f.mustClick(hold, "telegram:adm2", guardv1.Outcome_OUTCOME_APPROVE, "approve")
	f.eventually("admitted to ag-2", func() bool { return f.isMember(strangerID, "ag-2") })
}
