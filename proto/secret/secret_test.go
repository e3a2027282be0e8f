package secret_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
)

const token = "ghp_live_0123456789abcdef"

func TestAGroupsMCPEnvironmentIsRedactedWhereverItIsNested(t *testing.T) {
	in := &guardv1.ListGroupsResponse{Groups: []*guardv1.Group{{Id: "ag_1", Config: &guardv1.GroupConfig{
		McpServers: []*guardv1.McpServer{{Name: "gh", Command: "gh-mcp", Env: map[string]string{"GITHUB_TOKEN": token, "EMPTY": ""}}}}}}}
	out := secret.Redact(in)
	env := out.GetGroups()[0].GetConfig().GetMcpServers()[0].GetEnv()
	if env["GITHUB_TOKEN"] != secret.Redacted || env["EMPTY"] != secret.Redacted || len(env) != 2 {
		t.Fatalf("env = %v: want every value redacted, every key kept", env)
	}
	if in.GetGroups()[0].GetConfig().GetMcpServers()[0].GetEnv()["GITHUB_TOKEN"] != token {
		t.Fatal("Redact changed its argument: a message shared between answers would lose its secrets for everyone")
	}
	if out.GetGroups()[0].GetConfig().GetMcpServers()[0].GetCommand() != "gh-mcp" {
		t.Fatal("a field that is not secret was changed")
	}
}

func TestAnAnswerThatCannotCarryASecretIsNotCopied(t *testing.T) {
	in := &guardv1.DecideResponse{DecisionId: "dec_1", Decision: &guardv1.Decision{Reason: token}}
	if out := secret.Redact(in); out != in {
		t.Fatal("a decision was copied: the hot path pays for a clone it never needs")
	}
}

func TestAHoldPayloadShapedByItsKindIsRedactedAndItsCardScrubbed(t *testing.T) {
	payload, _ := structpb.NewStruct(map[string]any{"name": "gh", "command": "gh-mcp", "env": map[string]any{"GITHUB_TOKEN": token, "DEBUG": "1"}})
	h := &guardv1.Hold{Kind: "add_mcp_server", Payload: payload, Title: "Add MCP server",
		Question: "Agent group ag_1234567812345678 wants gh. Environment: DEBUG=1 GITHUB_TOKEN=" + token + " (v1.2)"}
	out := secret.Redact(&guardv1.GetResponse{Hold: h}).GetHold()
	env := out.GetPayload().GetFields()["env"].GetStructValue().AsMap()
	if env["GITHUB_TOKEN"] != secret.Redacted || env["DEBUG"] != secret.Redacted {
		t.Fatalf("payload env = %v", env)
	}
	q := out.GetQuestion()
	if strings.Contains(q, token) || !strings.Contains(q, "GITHUB_TOKEN="+secret.Redacted) || !strings.Contains(q, "DEBUG="+secret.Redacted) {
		t.Fatalf("question = %q: want the values scrubbed", q)
	}
	if !strings.Contains(q, "ag_1234567812345678") || !strings.Contains(q, "(v1.2)") {
		t.Fatalf("question = %q: a short value must not garble words around it", q)
	}
	if h.GetPayload().GetFields()["env"].GetStructValue().AsMap()["GITHUB_TOKEN"] != token {
		t.Fatal("the stored hold was changed")
	}
}

func TestACommandHoldsRequestIsRedactedByItsMethod(t *testing.T) {
	req := &guardv1.AddGroupMcpServerRequest{Group: "ag_1", Server: &guardv1.McpServer{Name: "gh", Command: "x", Env: map[string]string{"K": token}}}
	b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(req)
	var request structpb.Struct
	if err := protojson.Unmarshal(b, &request); err != nil {
		t.Fatal(err)
	}
	payload, _ := structpb.NewStruct(map[string]any{"method": guardv1.Registry_AddGroupMcpServer_FullMethodName, "caller": map[string]any{"kind": "agent"}})
	payload.Fields["request"] = structpb.NewStructValue(&request)
	cardJSON, _ := protojson.Marshal(req)
	grants := &guardv1.ListStandingGrantsResponse{Grants: []*guardv1.StandingGrant{{Kind: "cli_command", Payload: payload}}}
	holds := &guardv1.ListResponse{Holds: []*guardv1.Hold{{Kind: "cli_command", Payload: proto.Clone(payload).(*structpb.Struct), Question: "ncl groups mcp_add " + string(cardJSON)}}}
	for _, p := range []*structpb.Struct{secret.Redact(grants).GetGrants()[0].GetPayload(), secret.Redact(holds).GetHolds()[0].GetPayload()} {
		got := p.GetFields()["request"].GetStructValue().GetFields()["server"].GetStructValue().GetFields()["env"].GetStructValue().AsMap()
		if got["K"] != secret.Redacted {
			t.Fatalf("request env = %v", got)
		}
	}
	if q := secret.Redact(holds).GetHolds()[0].GetQuestion(); strings.Contains(q, token) {
		t.Fatalf("question = %q", q)
	}
}

func TestReferencesAreTheSecretsWrittenAsRedacted(t *testing.T) {
	req := &guardv1.AddGroupMcpServerRequest{Server: &guardv1.McpServer{Env: map[string]string{"A": secret.Redacted, "B": "set"}}}
	if got := secret.References(req); len(got) != 1 || got[0] != "server.env.A" {
		t.Fatalf("References = %v", got)
	}
}

func TestScrubReplacesJSONEscapedValues(t *testing.T) {
	v := `pa"ss\word-long`
	if got := secret.Scrub(`{"K":"pa\"ss\\word-long"}`, []string{v}); strings.Contains(got, "word-long") {
		t.Fatalf("Scrub = %q", got)
	}
}
