package holdview

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// What an agent is told of its hold names people as people: by name with
// their id, a group by its name.
func TestWhatTheRequesterIsTold(t *testing.T) {
	admins := &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{
		AgentGroupId: "ag_1", DeliveredTo: "telegram:dana"}}}
	exclusive := &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{
		UserId: "telegram:dana", AlsoUserIds: []string{"slack:U1"}}}}
	send := &guardv1.Hold{Kind: "a2a_message_gate", Resource: map[string]string{"to": "ag_2"},
		Payload: payload(t, map[string]any{"to": "ag_2", "text": "hello ops"}), Resolver: "telegram:dana"}
	for _, c := range []struct{ name, got, want string }{
		{"eligible, one", Eligible([]string{"telegram:dana"}, names, 1), "Dana (telegram:dana)"},
		{"eligible, either", Eligible([]string{"telegram:dana", "slack:U1"}, names, 1), "Dana (telegram:dana) or slack:U1"},
		{"eligible, a quorum", Eligible([]string{"telegram:dana", "slack:U1", "slack:U2"}, names, 2),
			"2 of Dana (telegram:dana), slack:U1 and slack:U2"},
		{"eligible, many", Eligible([]string{"a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7"}, names, 1), "a:1, a:2, a:3, a:4, a:5 or 2 more"},
		{"admins of a group, by name", Approvers(admins, names), "an admin of research (asked: Dana (telegram:dana))"},
		{"admins of a group, no names", Approvers(admins, nil), "an admin of ag_1 (asked: telegram:dana)"},
		{"named approvers", Approvers(exclusive, names), "Dana (telegram:dana) or slack:U1"},
		{"rejected with a reason", Rejected(send, names, "not today"),
			`Your request (to ops: hello ops) was rejected by Dana (telegram:dana): "not today"`},
		{"rejected without one", Rejected(send, names, ""), "Your request (to ops: hello ops) was rejected by Dana (telegram:dana); no reason was given."},
		{"approved by the resolver", ApprovedBy(send, names), "Dana (telegram:dana)"},
		{"approved by a quorum", ApprovedBy(&guardv1.Hold{Resolver: "slack:U1", Approvals: []*guardv1.HoldApproval{
			{UserId: "telegram:dana"}, {UserId: "slack:U1"}, {UserId: "slack:U9", Ineligible: true}}}, names),
			"Dana (telegram:dana) and slack:U1"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}
