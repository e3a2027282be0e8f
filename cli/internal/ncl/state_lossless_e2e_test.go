package ncl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ghToken = "ghp_exported_never_0123456789"

// losslessWorld is every kind of setting an export must carry: an explicit
// enforce mode under an audit-mode catalog, an MCP server with a secret,
// its default and a tool's own setting, a console sign-in.
func losslessWorld(t *testing.T) *realServer {
	t.Helper()
	srv := startRealServer(t)
	for _, args := range [][]string{
		{"users", "create", "telegram:dana", "--display-name", "Dana"},
		{"users", "create", "telegram:erin"},
		{"users", "bind-oidc", "telegram:dana", "--issuer", "https://accounts.example.com", "--subject", "248289761001"},
		{"groups", "create", "--name", "research", "--cli-scope", "group"},
		{"groups", "create", "--name", "ops", "--cli-scope", "group"},
		{"roles", "grant", "--user", "telegram:dana", "--role", "admin", "--scope", "group", "--group", "research"},
		{"destinations", "add", "--group", "research", "--name", "ops", "--target-group", "ops"},
		{"catalog", "set", "--action", "a2a.send", "--mode", "audit"},
		{"policies", "set", "--from", "research", "--to", "ops", "--approver", "telegram:dana", "--mode", "enforce"},
		{"groups", "mcp", "add", "research", "--name", "gh", "--command", "gh-mcp", "--env", "GITHUB_TOKEN=" + ghToken},
		{"mcp", "servers", "set-default", "--group", "research", "--server", "gh", "--effect", "allow"},
		{"mcp", "tools", "set", "--group", "research", "--server", "gh", "--tool", "create_issue", "--effect", "hold", "--mode", "enforce"},
	} {
		srv.must(t, args...)
	}
	return srv
}

// Issue 41, items 6 and 12: every setting round-trips; drifting any of them
// is a change apply --dry-run names; an MCP secret is written as a reference
// that apply keeps, and export -f writes a file only its owner reads.
func TestExportIsLosslessAndKeepsSecretsOut(t *testing.T) {
	srv := losslessWorld(t)
	file := filepath.Join(t.TempDir(), "state.yaml")
	srv.must(t, "export", "-f", file)
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("export -f wrote mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(file)
	exported := string(b)
	if strings.Contains(exported, ghToken) {
		t.Fatalf("export wrote the MCP secret in clear:\n%s", exported)
	}
	for _, want := range []string{"GITHUB_TOKEN: <redacted>", "mode: enforce", "default:\n          effect: allow",
		"tool: create_issue", "issuer: https://accounts.example.com", "subject: \"248289761001\""} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	if r := srv.applyFile(t, exported, "--dry-run"); r.code != 0 || strings.TrimSpace(r.out) != "No changes." {
		t.Fatalf("export | apply --dry-run: exit %d, %q, want no changes", r.code, r.out)
	}

	// Drift every setting on the server.
	for _, args := range [][]string{
		{"policies", "set", "--from", "research", "--to", "ops", "--approver", "telegram:dana"}, // inherit: audit
		{"mcp", "servers", "set-default", "--group", "research", "--server", "gh", "--effect", "deny"},
		{"mcp", "tools", "set", "--group", "research", "--server", "gh", "--tool", "create_issue", "--effect", "allow"},
		{"mcp", "tools", "set", "--group", "research", "--server", "gh", "--tool", "merge_pr", "--effect", "allow"},
		{"users", "unbind-oidc", "telegram:dana", "--issuer", "https://accounts.example.com", "--subject", "248289761001"},
	} {
		srv.must(t, args...)
	}
	dry := srv.applyFile(t, exported, "--dry-run")
	for _, w := range []string{
		"~ policy research → ops: approvers telegram:dana, mode inherit → telegram:dana, mode enforce",
		"~ mcp server gh of group research: default deny → allow",
		"~ mcp tool gh.create_issue of group research: allow → hold, mode enforce",
		"not deleted without --prune: mcp tool gh.merge_pr of group research setting (allow)",
		"+ oidc sign-in of user telegram:dana: https://accounts.example.com 248289761001",
	} {
		if !strings.Contains(dry.out, w) {
			t.Errorf("dry run does not name the drift %q:\n%s", w, dry.out)
		}
	}
	if r := srv.applyFile(t, exported, "--prune"); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if after := srv.must(t, "export"); after != exported {
		t.Errorf("after apply the export is not the document:\n%s\nwant:\n%s", after, exported)
	}
	// The reference kept the secret the server holds, through a replace.
	edited := strings.Replace(exported, "command: gh-mcp", "command: gh-mcp-v2", 1)
	if r := srv.applyFile(t, edited); r.code != 0 || !strings.Contains(r.out, "~ mcp server gh of group research: gh-mcp-v2") {
		t.Fatalf("apply of a changed command: exit %d\n%s%s", r.code, r.out, r.err)
	}
	var env string
	if err := srv.DB(t).QueryRow(context.Background(), `SELECT mcp_servers->0->'env'->>'GITHUB_TOKEN' FROM container_configs c JOIN agent_groups g ON g.id = c.agent_group_id WHERE g.name = 'research'`).Scan(&env); err != nil {
		t.Fatal(err)
	}
	if env != ghToken {
		t.Fatalf("after apply the server's GITHUB_TOKEN is %q, want the value it held (the reference keeps it)", env)
	}
}
