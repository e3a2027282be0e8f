package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A held action's card is what the approver judges. A container that puts
// the real content where the card does not look (a2a "content"/"payload",
// which the server delivers; an MCP server's env, which is applied with it)
// must not get it approved unseen.
func TestHoldCardsShowEverythingTheActionApplies(t *testing.T) {
	s := startServer(t)
	a, _, _, _ := a2aSetupScript(t, s, func(a, b string) []any {
		return []any{
			step("send_message", map[string]any{"to": b, "text": "hello beta",
				"content": "HIDDEN-CONTENT", "payload": map[string]any{"note": "HIDDEN-DATA"}}),
			step("add_mcp_server", map[string]any{"name": "docs", "command": "npx", "args": []any{"docs-mcp"},
				"env": map[string]any{"NODE_OPTIONS": "--require /workspace/evil.js"}}),
		}
	})
	// An env value is a secret (issue 41): the card names every variable
	// the server gets, never a value.
	want := map[string][]string{
		"a2a_message_gate": {"hello beta", "HIDDEN-CONTENT", "HIDDEN-DATA"},
		"add_mcp_server":   {"docs-mcp", "NODE_OPTIONS=<redacted>"},
	}
	for kind, parts := range want {
		var hold *guardv1.Hold
		waitFor(t, 30*time.Second, kind+" hold", func() bool {
			resp, err := s.op.approvals.List(context.Background(), &guardv1.ListRequest{Kind: kind, AgentGroupId: a})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetHolds()) > 0 {
				hold = resp.GetHolds()[0]
			}
			return hold != nil
		})
		for _, p := range parts {
			if !strings.Contains(hold.GetQuestion(), p) {
				t.Errorf("%s card does not show %q:\n%s", kind, p, hold.GetQuestion())
			}
		}
		if strings.Contains(hold.GetQuestion(), "evil.js") {
			t.Errorf("%s card shows an env value:\n%s", kind, hold.GetQuestion())
		}
	}
}

// a2aSetupScript is a2aSetup (process runtime) with alpha's script built
// from the two group ids.
func a2aSetupScript(t *testing.T, s *server, script func(a, b string) []any) (a, b, dana string, r *runner) {
	ctx := context.Background()
	a = s.group(t, "alpha", guardv1.CliScope_CLI_SCOPE_GROUP)
	b = s.group(t, "beta", guardv1.CliScope_CLI_SCOPE_GROUP)
	s.owner(t, "telegram:olivia")
	dana = "telegram:dana"
	if _, err := s.op.registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: dana}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: a, Name: "beta", TargetGroup: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: a, ToGroup: b, ApproverUserId: dana}); err != nil {
		t.Fatal(err)
	}
	r = s.startRunner(t, runnerOpts{groups: []string{a, b}, script: map[string]any{a: script(a, b)}})
	return a, b, dana, r
}
