package ncl

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
)

// ncl mcp sets and shows what each tool call of a guarded MCP server gets;
// a held call shows its server, tool and exact arguments in ncl approvals,
// and is approved there.
func TestMCPServersToolsAndHeldCalls(t *testing.T) {
	srv := startRealServer(t)
	group := jsonObj(t, srv.must(t, "groups", "create", "--name", "fleet", "-o", "json"))["id"].(string)
	srv.must(t, "groups", "mcp", "add", group, "--name", "fs", "--command", "fs-mcp", "--env", "FS_TOKEN=s3cret", "--image", "example/fs-mcp:1")
	srv.must(t, "users", "create", "--id", "telegram:1")
	srv.must(t, "roles", "grant", "--user", "telegram:1", "--role", "owner", "--scope", "global")

	out := srv.must(t, "mcp", "servers", "list", "--group", group)
	if !strings.Contains(out, "fs") || !strings.Contains(out, "hold (unset)") || !strings.Contains(out, "example/fs-mcp:1") || strings.Contains(out, "s3cret") {
		t.Fatalf("servers list:\n%s", out)
	}
	srv.must(t, "mcp", "servers", "set-default", "--group", group, "--server", "fs", "--effect", "allow")
	srv.must(t, "mcp", "tools", "set", "--group", group, "--server", "fs", "--tool", "write_file", "--effect", "hold", "--approvals", "1")
	srv.must(t, "mcp", "tools", "set", "--group", group, "--server", "fs", "--tool", "rm", "--effect", "deny")
	tools := jsonArr(t, srv.must(t, "mcp", "tools", "list", "--group", group, "--server", "fs", "-o", "json"))
	if len(tools) != 2 || tools[0]["tool"] != "rm" || tools[0]["effect"] != "deny" || tools[1]["tool"] != "write_file" ||
		tools[1]["effect"] != "hold" || tools[1]["source"] != "tool" {
		t.Fatalf("tools list: %v", tools)
	}
	if r := srv.ncl(t, "mcp", "tools", "set", "--group", group, "--server", "fs", "--tool", "x", "--effect", "maybe"); r.code != ExitUsage {
		t.Fatalf("a bad effect: exit %d, want usage (%s)", r.code, r.err)
	}
	if r := srv.ncl(t, "mcp", "tools", "set", "--group", group, "--server", "nope", "--tool", "x", "--effect", "allow"); r.code == 0 {
		t.Fatal("a setting of a server the group does not have was accepted")
	}

	// A runner's session asks to call write_file: held, with the card the
	// runner makes.
	ctx := context.Background()
	tok := srv.Token(t, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: "r1", RunnerId: "r1"})
	reg := guardv1.NewRegistryClient(srv.Dial(t, tok))
	if _, err := reg.RegisterRunner(ctx, &guardv1.RegisterRunnerRequest{RunnerId: "r1", InstanceId: "i1",
		DeliveryActions: []*guardv1.DeliveryActionDecl{{Name: mcpcall.DeliveryAction, CatalogAction: mcpcall.CatalogAction}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := reg.OpenSession(ctx, &guardv1.OpenSessionRequest{AgentGroupId: group})
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"path": "notes/today.md", "content": "ship it"}
	p, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "write_file", "arguments": args})
	d, _ := mcpcall.Digest("fs", "write_file", args)
	actx := metadata.AppendToOutgoingContext(ctx, "x-clawguard-session", sess.GetSession().GetId())
	resp, err := guardv1.NewGuardClient(srv.Dial(t, tok)).Decide(actx, &guardv1.DecideRequest{Action: mcpcall.CatalogAction,
		Resource: mcpcall.Resource("fs", "write_file", d), Payload: p,
		Card: &guardv1.HoldCard{Title: "MCP tool call: fs / write_file", Question: "Agent group wants to call tool write_file of MCP server fs",
			Kind: mcpcall.ApprovalKind, DeliveryAction: mcpcall.DeliveryAction, Payload: p}})
	if err != nil || resp.GetHoldId() == "" {
		t.Fatalf("held call: %v, %v", resp, err)
	}
	hold := resp.GetHoldId()
	if out := srv.must(t, "approvals", "list"); !strings.Contains(out, hold) || !strings.Contains(out, "write_file") {
		t.Fatalf("approvals list:\n%s", out)
	}
	got := srv.must(t, "approvals", "get", hold)
	for _, want := range []string{"fs", "write_file", "notes/today.md", "ship it"} {
		if !strings.Contains(got, want) {
			t.Fatalf("approvals get lacks %q:\n%s", want, got)
		}
	}
	srv.must(t, "approvals", "approve", hold, "--as", "telegram:1")
	if h := jsonObj(t, srv.must(t, "approvals", "get", hold, "-o", "json")); h["status"] != "approved" {
		t.Fatalf("after approve: %v", h)
	}
}
