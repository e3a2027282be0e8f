package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
)

// A held MCP tool call's page names the server and the tool and shows the
// exact arguments that will run; its approver approves it there.
func TestMCPCallHoldShowsServerToolAndArguments(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	if _, err := f.srv.Pool.Exec(ctx, `INSERT INTO container_configs (agent_group_id, mcp_servers)
		VALUES ('research', '[{"name": "fs", "command": "fs-mcp"}]')`); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"path": "report.md", "content": "quarterly numbers"}
	p := mustStruct(t, map[string]any{"server": "fs", "tool": "write_file", "arguments": args})
	d, err := mcpcall.Digest("fs", "write_file", args)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.runner.Guard.Decide(ctx, &guardv1.DecideRequest{Action: mcpcall.CatalogAction, Resource: mcpcall.Resource("fs", "write_file", d),
		Payload: p, Card: &guardv1.HoldCard{Title: "MCP tool call: fs / write_file", Question: "Agent group research wants to call write_file.",
			Kind: mcpcall.ApprovalKind, DeliveryAction: mcpcall.DeliveryAction, Payload: p}})
	if err != nil || resp.GetHoldId() == "" {
		t.Fatalf("held call: %v %v", resp, err)
	}
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)
	r, page := dana.get("/holds/" + resp.GetHoldId())
	for _, want := range []string{`<code id="mcp-server">fs</code>`, `<code id="mcp-tool">write_file</code>`, `&#34;path&#34;: &#34;report.md&#34;`,
		`&#34;content&#34;: &#34;quarterly numbers&#34;`, `id="approve"`} {
		if r.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("hold page lacks %s (status %d):\n%s", want, r.StatusCode, page)
		}
	}
	if r, _ := dana.post("/holds/"+resp.GetHoldId()+"/resolve", map[string][]string{"csrf": {csrf}, "outcome": {"approve"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", r.StatusCode)
	}
	var st string
	if err := f.srv.Pool.QueryRow(ctx, `SELECT status FROM holds WHERE id = $1`, resp.GetHoldId()).Scan(&st); err != nil || st != "approved" {
		t.Fatalf("after approving in the console: %q %v", st, err)
	}
}
