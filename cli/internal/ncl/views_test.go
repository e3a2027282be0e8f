package ncl

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

var t0 = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func ts(min int) *timestamppb.Timestamp {
	return timestamppb.New(t0.Add(time.Duration(min) * time.Minute))
}

func fixtureGroups() []*guardv1.Group {
	return []*guardv1.Group{
		{Id: "ag_research", Name: "research", CreatedAt: ts(0), Config: &guardv1.GroupConfig{
			CliScope: guardv1.CliScope_CLI_SCOPE_GROUP, Cpus: "1.5", Memory: "2g", AptPackages: []string{"curl", "jq"},
			McpServers: []*guardv1.McpServer{{Name: "files", Command: "mcp-files"}}, Version: 3,
		}},
		{Id: "ag_ops", Name: "ops", BaseImage: "clawguard/agent:1", PinnedHost: "host-2", CreatedAt: ts(5),
			Config: &guardv1.GroupConfig{CliScope: guardv1.CliScope_CLI_SCOPE_GLOBAL}},
	}
}

func fixtureHolds() []*guardv1.Hold {
	p, _ := structpb.NewStruct(map[string]any{"to": "ag_ops", "text": "deploy please"})
	return []*guardv1.Hold{
		{
			Id: "ho_1", Kind: "a2a_message_gate", CatalogAction: "a2a.send", AgentGroupId: "ag_research", SessionId: "se_9",
			ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: "telegram:dana"}},
				EscalatedUserIds: []string{"telegram:erin"}},
			ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP, Status: guardv1.HoldStatus_HOLD_STATUS_PENDING,
			Title: "research → ops", Question: "Let research message ops?", CreatedAt: ts(1), ExpiresAt: ts(61),
			Payload:   p,
			Requester: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag_research", SessionId: "se_9"}}},
			Options:   []*guardv1.HoldOption{{Label: "Approve", Value: "approve"}, {Label: "Reject", Value: "reject"}},
			RemindAt:  ts(11), RemindedAt: ts(11), EscalateAt: ts(31), EscalatedAt: ts(31), EscalateTo: []string{"group:ag_ops"},
			EscalatedTo: []string{"telegram:erin"},
		},
		{
			Id: "ho_2", Kind: "cli_command", CatalogAction: "roles.grant",
			ApproverRule:  &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{DeliveredTo: "slack:olga"}}},
			ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL, Status: guardv1.HoldStatus_HOLD_STATUS_REJECTED,
			CreatedAt: ts(2), ResolvedAt: ts(3), Resolver: "slack:olga", Reason: "not during the freeze",
			Requester: &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "telegram:alice"}}},
		},
		{
			Id: "ho_3", Kind: "mcp_call", CatalogAction: "mcp.call", AgentGroupId: "ag_ops", SessionId: "se_4",
			ApproverRule:  &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: "ag_ops"}}},
			ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP, Status: guardv1.HoldStatus_HOLD_STATUS_PENDING,
			Title: "MCP tool call: fs / write_file", CreatedAt: ts(-125), ApprovalsRequired: 2,
			Approvals: []*guardv1.HoldApproval{{UserId: "telegram:dana", At: ts(-5)}},
			Resource:  map[string]string{"server": "fs", "tool": "write_file", "digest": "d1"},
			Payload:   mcpPayload,
			Requester: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag_ops", SessionId: "se_4"}}},
		},
	}
}

var mcpPayload, _ = structpb.NewStruct(map[string]any{"server": "fs", "tool": "write_file", "arguments": map[string]any{"path": "/etc/motd"}})

func fixtureDecisions() []*guardv1.DecisionRecord {
	return []*guardv1.DecisionRecord{
		{Id: "de_1", At: ts(1), Action: "a2a.send", Effect: guardv1.Effect_EFFECT_HOLD, Reason: "message policy research → ops", DecidedBy: "baseline", HoldId: "ho_1",
			Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag_research", SessionId: "se_9"}}}, Latency: durationpb.New(850 * time.Microsecond)},
		{Id: "de_2", At: ts(2), Action: "self_mod.install_packages", Effect: guardv1.Effect_EFFECT_DENY, Reason: "invalid apt package name", DecidedBy: "precheck",
			Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag_ops"}}}},
		{Id: "de_3", At: ts(3), Action: "groups.create", Effect: guardv1.Effect_EFFECT_ALLOW, Reason: "operator", DecidedBy: "baseline", DryRun: true,
			Actor: &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}},
	}
}

func fixturePolicies() []*guardv1.MessagePolicy {
	return []*guardv1.MessagePolicy{
		{FromGroup: "ag_research", ToGroup: "ag_ops", ApproverUserId: "telegram:dana",
			RemindAfter: durationpb.New(10 * time.Minute), EscalateAfter: durationpb.New(90 * time.Minute), EscalateTo: []string{"telegram:erin", "group:ag_ops"}},
		{FromGroup: "ag_ops", ToGroup: "ag_gone", ApproverUserId: "telegram:erin", AlsoApproverUserIds: []string{"telegram:dana"}, Approvals: 2,
			Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT},
	}
}

func fixtureCatalog() []*guardv1.CatalogEntry {
	return []*guardv1.CatalogEntry{
		{Action: "a2a.send", ApprovalAction: "a2a_message_gate", Access: guardv1.Access_ACCESS_APPROVAL, Description: "agent-to-agent message",
			RemindAfter: durationpb.New(10 * time.Minute)},
		{Action: "groups.list", Access: guardv1.Access_ACCESS_OPEN, Resource: "groups", Description: "list agent groups"},
	}
}

func fixtureRunners() []*guardv1.Runner {
	return []*guardv1.Runner{
		{Id: "host-1", Host: "host-1.lan", Version: "0.1.0", Capabilities: []string{"docker", "images"}, Live: true, Sessions: 3,
			LeaseExpiresAt: ts(1), RegisteredAt: ts(-60), Labels: map[string]string{"zone": "a", "gpu": "no"},
			DeliveryActions: []*guardv1.DeliveryActionDecl{{Name: "install_packages", CatalogAction: "self_mod.install_packages"}, {Name: "cli_request"}}},
		{Id: "host-2", Host: "host-2.lan", Version: "0.1.0", Capabilities: []string{"process"}, LeaseExpiresAt: ts(-10)},
	}
}

func fixtureDecision() *guardv1.Decision {
	return &guardv1.Decision{
		Effect: guardv1.Effect_EFFECT_HOLD, Reason: "message policy research → ops", DecidedBy: "baseline",
		ApproverRule:  &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: "telegram:dana"}}},
		ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
	}
}

func fixtureExplanation() *guardv1.Explanation {
	return &guardv1.Explanation{
		Summary: "held because the message policy research → ops names telegram:dana; no policy → allow",
		Entry:   &guardv1.ExplainedEntry{Action: "a2a.send", InCatalog: true, Description: "an agent messages another agent group", ApprovalAction: "a2a_message_gate"},
		Checks: []*guardv1.ExplainedCheck{
			{Name: "destination", Outcome: "pass", Detail: "the destination research → ops exists",
				Facts: []*guardv1.ExplainedFact{{Name: "destination", Value: "true", Present: true}}},
			{Name: "message policy", Outcome: "hold", Detail: "the message policy research → ops names telegram:dana as the only approver",
				Facts: []*guardv1.ExplainedFact{{Name: "policy_approver", Value: "telegram:dana", Present: true}, {Name: "policy_also"}}},
		},
		WouldChange: []string{"no message policy research → ops → allow (the destination exists)"},
	}
}

func fixtureEvents() []*guardv1.WatchResponse {
	h := fixtureHolds()
	return []*guardv1.WatchResponse{
		{Cursor: 41, Type: guardv1.EventType_EVENT_TYPE_REQUESTED, Hold: h[0], At: ts(1), Undelivered: true},
		{Cursor: 42, Type: guardv1.EventType_EVENT_TYPE_RESOLVED, Hold: h[1], Outcome: guardv1.Outcome_OUTCOME_REJECT, Resolver: "slack:olga", At: ts(3)},
	}
}

// fixtureNames knows research, ops and Dana; ag_gone has no name.
type fixtureNames map[string]string

func (n fixtureNames) GroupName(id string) string { return n["g:"+id] }
func (n fixtureNames) UserName(id string) string  { return n["u:"+id] }

var fixtureBook = fixtureNames{"g:ag_research": "research", "g:ag_ops": "ops", "u:telegram:dana": "Dana", "u:slack:olga": "Olga"}

// TestGolden prints the kinds' views in every output mode against files
// (go test -update rewrites them).
func TestGolden(t *testing.T) {
	type tc struct {
		name string
		run  func(p render.Printer) error
		wide bool // also -o wide
	}
	list := func(typ proto.Message, items []proto.Message) func(render.Printer) error {
		return func(p render.Printer) error { return p.List(typ, items) }
	}
	obj := func(m proto.Message) func(render.Printer) error {
		return func(p render.Printer) error { return p.Object(m) }
	}
	events := func(p render.Printer) error {
		for _, ev := range fixtureEvents() {
			if err := p.Event(ev); err != nil {
				return err
			}
		}
		return nil
	}
	cases := []tc{
		{"groups_list", list(&guardv1.Group{}, render.Msgs(fixtureGroups())), false},
		{"groups_empty", list(&guardv1.Group{}, nil), false},
		{"group_get", obj(fixtureGroups()[0]), false},
		{"approvals_list", list(&guardv1.Hold{}, render.Msgs(fixtureHolds())), true},
		{"approval_get", obj(fixtureHolds()[0]), false},
		{"decisions_list", list(&guardv1.DecisionRecord{}, render.Msgs(fixtureDecisions())), true},
		{"policies_list", list(&guardv1.MessagePolicy{}, render.Msgs(fixturePolicies())), true},
		{"catalog_list", list(&guardv1.CatalogEntry{}, render.Msgs(fixtureCatalog())), false},
		{"runners_list", list(&guardv1.Runner{}, render.Msgs(fixtureRunners())), false},
		{"explain", obj(fixtureDecision()), false},
		{"explain_why", func(p render.Printer) error { return p.Explained(fixtureDecision(), fixtureExplanation()) }, false},
		{"watch", events, false},
		{"done", func(p render.Printer) error { return p.Done("removed destination b of group ag_A") }, false},
	}
	now := t0.Add(10 * time.Minute)
	for _, c := range cases {
		modes := []struct {
			suffix string
			p      render.Printer
		}{{"table", render.Printer{Names: fixtureBook, Viewer: "telegram:dana", Now: now}}, {"json", render.Printer{JSON: true}}, {"quiet", render.Printer{Quiet: true}}}
		if c.wide {
			modes = append(modes, struct {
				suffix string
				p      render.Printer
			}{"wide", render.Printer{Wide: true, Names: fixtureBook, Now: now}})
		}
		for _, mode := range modes {
			t.Run(c.name+"_"+mode.suffix, func(t *testing.T) {
				var buf bytes.Buffer
				p := mode.p
				p.W, p.Views = &buf, allViews()
				if err := c.run(p); err != nil {
					t.Fatal(err)
				}
				golden(t, filepath.Join("testdata", c.name+"."+mode.suffix+".golden"), buf.Bytes())
			})
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
