package holdcard

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// What a card says, whatever draws it.
func TestCardSays(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	args, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "write_file", "arguments": map[string]any{"path": "/tmp/x", "mode": 420}})
	mcp := &guardv1.Hold{Id: "hold_1", Kind: "mcp_call", AgentGroupId: "ag_1", Payload: args,
		Resource: map[string]string{"server": "fs", "tool": "write_file", "digest": "d"}}
	quorum := &guardv1.Hold{Id: "hold_2", Kind: "a2a_message_gate", Title: "research → ops", ApprovalsRequired: 3,
		Approvals: []*guardv1.HoldApproval{{UserId: "telegram:dana", At: timestamppb.New(t0)}, {UserId: "telegram:erin", Ineligible: true}}}
	chosen := &guardv1.Hold{Id: "hold_3", Kind: "channel_registration", Status: guardv1.HoldStatus_HOLD_STATUS_APPROVED, Resolver: "telegram:olga",
		Choice: "new", Options: []*guardv1.HoldOption{{Label: "New agent", Value: "new"}}, ResolvedAt: timestamppb.New(t0), ExpiresAt: timestamppb.New(t0)}
	cases := []struct {
		name  string
		h     *guardv1.Hold
		check func(t *testing.T, c Card)
	}{
		{"an MCP call says its exact call", mcp, func(t *testing.T, c Card) {
			if c.Title != "mcp_call" || c.Call == nil || c.Call.Server != "fs" || c.Call.Tool != "write_file" || c.Call.Group != "ag_1" {
				t.Fatalf("title %q, call %+v", c.Title, c.Call)
			}
			if c.Call.Arguments != "{\n  \"mode\": 420,\n  \"path\": \"/tmp/x\"\n}" {
				t.Fatalf("arguments %q", c.Call.Arguments)
			}
			if !strings.Contains(c.Payload(), "\"tool\": \"write_file\"") {
				t.Fatalf("payload %s", c.Payload())
			}
		}},
		{"a quorum counts the eligible", quorum, func(t *testing.T, c Card) {
			q := c.Quorum
			if q.Required != 3 || q.Counted != 1 || len(q.Approvals) != 2 || !q.Approvals[0].At.Equal(t0) || q.Approvals[1].Counts {
				t.Fatalf("quorum %+v", q)
			}
			if !q.Mine("telegram:dana") || q.Mine("telegram:erin") || c.Call != nil || c.Payload() != "(no payload)" {
				t.Fatalf("mine: dana %v erin %v; call %v; payload %q", q.Mine("telegram:dana"), q.Mine("telegram:erin"), c.Call, c.Payload())
			}
		}},
		{"an outcome names the choice", chosen, func(t *testing.T, c Card) {
			o := c.Outcome
			if o.Status != guardv1.HoldStatus_HOLD_STATUS_APPROVED || o.By != "telegram:olga" || o.Choice != "New agent" || !o.At.Equal(t0) || !c.Expires.Equal(t0) {
				t.Fatalf("outcome %+v, expires %v", o, c.Expires)
			}
			if c.Quorum.Required != 1 {
				t.Fatalf("a hold of one approval: required %d", c.Quorum.Required)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(t, Of(c.h)) })
	}
}

// Who may decide, in the words of the rule, each edge naming people its way.
func TestDeciders(t *testing.T) {
	excl := &guardv1.Hold{ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP, ApproverRule: &guardv1.ApproverRule{
		Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: "telegram:dana", AlsoUserIds: []string{"telegram:erin"}}}}}
	chain := &guardv1.Hold{ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL, ApproverRule: &guardv1.ApproverRule{
		EscalatedUserIds: []string{"telegram:owen"},
		Kind:             &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: "ag_1", DeliveredTo: "telegram:dana"}}}}
	upper := strings.ToUpper
	cases := []struct {
		h             *guardv1.Hold
		person, group func(string) string
		want          string
	}{
		{excl, nil, nil, "only telegram:dana, telegram:erin (nobody else, not even an owner); group scope"},
		{excl, upper, nil, "only TELEGRAM:DANA, TELEGRAM:ERIN (nobody else, not even an owner); group scope"},
		{chain, nil, upper, "admins of group AG_1, global admins and owners, and telegram:dana (the approver it was delivered to), and telegram:owen (added by its escalation); global scope: the clicker must also be an owner or a global admin"},
		{&guardv1.Hold{}, nil, nil, "nobody (the hold has no approver rule)"},
	}
	for _, c := range cases {
		if got := Of(c.h).Deciders(c.person, c.group); got != c.want {
			t.Errorf("Deciders =\n %s\nwant\n %s", got, c.want)
		}
	}
}
