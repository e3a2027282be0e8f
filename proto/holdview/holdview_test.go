package holdview

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

type book map[string]string

func (b book) GroupName(id string) string { return b["g:"+id] }
func (b book) UserName(id string) string  { return b["u:"+id] }

var names = book{"g:ag_1": "research", "g:ag_2": "ops", "u:telegram:dana": "Dana"}

func payload(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The one table of what a pending list says a hold asks, by kind: the
// console's pending list and `ncl approvals list` both print Summary.
func TestSummaryByKind(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, c := range []struct {
		name string
		h    *guardv1.Hold
		want string
	}{
		{"a2a by the target's name", &guardv1.Hold{Kind: "a2a_message_gate", Resource: map[string]string{"to": "ag_2"},
			Payload: payload(t, map[string]any{"to": "ag_2", "text": "hello ops"})}, "to ops: hello ops"},
		{"a2a to a group whose name is unknown", &guardv1.Hold{Kind: "a2a_message_gate",
			Payload: payload(t, map[string]any{"to": "ag_9", "content": "hi\nthere"})}, "to ag_9: hi there"},
		{"a long message is cut", &guardv1.Hold{Kind: "a2a_message_gate", Resource: map[string]string{"to": "ag_2"},
			Payload: payload(t, map[string]any{"text": long})}, "to ops: " + strings.Repeat("x", MaxSummary-9) + "…"},
		{"apt and npm", &guardv1.Hold{Kind: "install_packages", Payload: payload(t, map[string]any{"apt": []any{"cowsay", "jq"}, "npm": []any{"left-pad"}})},
			"apt: cowsay jq; npm: left-pad"},
		{"apt only", &guardv1.Hold{Kind: "install_packages", Payload: payload(t, map[string]any{"apt": []any{"cowsay"}})}, "apt: cowsay"},
		{"mcp call", &guardv1.Hold{Kind: "mcp_call", Resource: map[string]string{"server": "fs", "tool": "write_file", "digest": "d"},
			Payload: payload(t, map[string]any{"server": "fs", "tool": "write_file", "arguments": map[string]any{"path": "/tmp/x"}})},
			`mcp fs.write_file {"path":"/tmp/x"}`},
		{"add mcp server", &guardv1.Hold{Kind: "add_mcp_server", Payload: payload(t, map[string]any{"name": "files", "command": "mcp-files", "args": []any{"/data"}})},
			"mcp server files: mcp-files /data"},
		{"create agent", &guardv1.Hold{Kind: "create_agent", Payload: payload(t, map[string]any{"name": "helper"})}, `new agent "helper"`},
		{"a command, its group by name", &guardv1.Hold{Kind: "cli_command", Title: "CLI: roles.grant", Payload: payload(t, map[string]any{
			"method":  "/guard.v1.Registry/GrantRole",
			"request": map[string]any{"user_id": "telegram:eve", "role": "ROLE_ADMIN", "scope": "ROLE_SCOPE_GROUP", "group": "ag_1"},
		})}, "ncl roles grant group=research role=admin scope=group user_id=telegram:eve"},
		{"a sender", &guardv1.Hold{Kind: "sender_admit", Payload: payload(t, map[string]any{"sender_user_id": "telegram:7", "sender_name": "Sally", "agent_group_id": "ag_1"})},
			"admit Sally (telegram:7) to research"},
		{"a chat", &guardv1.Hold{Kind: "channel_registration", Payload: payload(t, map[string]any{"channel_type": "telegram", "platform_id": "-100"})},
			"connect telegram chat -100"},
		{"another kind: its title", &guardv1.Hold{Kind: "onecli_credential", Title: "Credential use"}, "Credential use"},
		{"nothing to say: the kind", &guardv1.Hold{Kind: "install_packages"}, "install_packages"},
	} {
		if got := Summary(c.h, names); got != c.want {
			t.Errorf("%s: Summary = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRequesterAndProgress(t *testing.T) {
	agent := &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag_1", SessionId: "s"}}}
	human := &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "telegram:dana"}}}
	stranger := &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "telegram:zed"}}}
	for actor, want := range map[*guardv1.Actor]string{agent: "agent of research", human: "Dana", stranger: "telegram:zed",
		{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}: "operator"} {
		if got := Requester(actor, names); got != want {
			t.Errorf("Requester = %q, want %q", got, want)
		}
	}
	if got := Requester(agent, nil); got != "agent of ag_1" {
		t.Errorf("Requester without names = %q", got)
	}

	quorum := &guardv1.Hold{Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, ApprovalsRequired: 2,
		Approvals: []*guardv1.HoldApproval{{UserId: "telegram:dana"}}}
	for _, c := range []struct {
		h      *guardv1.Hold
		viewer string
		want   string
	}{
		{quorum, "telegram:dana", "1 of 2 — you approved"},
		{quorum, "telegram:eve", "1 of 2"},
		{quorum, "", "1 of 2"},
		{&guardv1.Hold{Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, ApprovalsRequired: 2,
			Approvals: []*guardv1.HoldApproval{{UserId: "telegram:dana", Ineligible: true}}}, "telegram:dana", "0 of 2 — yours no longer counts"},
		{&guardv1.Hold{Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, ApprovalsRequired: 1}, "telegram:dana", "0 of 1"},
		{&guardv1.Hold{Status: guardv1.HoldStatus_HOLD_STATUS_PENDING}, "", "0 of 1"},
		{&guardv1.Hold{Status: guardv1.HoldStatus_HOLD_STATUS_APPROVED, ApprovalsRequired: 1, Resolver: "telegram:dana"}, "telegram:dana", "1 of 1 — you approved"},
	} {
		if got := Progress(c.h, c.viewer); got != c.want {
			t.Errorf("Progress(%v, %q) = %q, want %q", c.h, c.viewer, got, c.want)
		}
	}
}
