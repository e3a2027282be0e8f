package mcptools

import (
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/mcphost"
)

// What a server of a group reports — its failure, read by the group's
// agents and admins in ncl mcp servers list — carries none of the group's
// env values (issue 41: secrets are write-only), whatever the server said.
func TestAReportedFailureCarriesNoSecret(t *testing.T) {
	tools := New(Deps{Host: mcphost.New(mcphost.Config{DataDir: t.TempDir()})})
	tools.Sync(&guardv1.Group{Id: "g1", Config: &guardv1.GroupConfig{McpServers: []*guardv1.McpServer{
		{Name: "gh", Command: "gh-mcp", Env: map[string]string{"GITHUB_TOKEN": "ghp_0123456789abcdef"}}}}})
	got := tools.scrubbed("g1", "gh-mcp: bad credentials ghp_0123456789abcdef (exit 1)")
	if strings.Contains(got, "ghp_0123456789abcdef") || !strings.Contains(got, "bad credentials <redacted> (exit 1)") {
		t.Fatalf("reported %q", got)
	}
	if got := tools.scrubbed("g2", "ghp_0123456789abcdef"); got != "ghp_0123456789abcdef" {
		t.Fatalf("another group's text changed: %q", got)
	}
}
