package ncl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 43: a group's egress rules and default, its agent command and
// environment and its instructions round-trip through export and apply;
// drifting each is a change apply --dry-run names, and apply restores it.
func TestExportCarriesTheAgentAndItsWayOut(t *testing.T) {
	srv := startRealServer(t)
	task := filepath.Join(t.TempDir(), "task.md")
	if err := os.WriteFile(task, []byte("Fix the parser.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"groups", "create", "--name", "coder"},
		{"egress", "set", "--group", "coder", "--host", "*.github.com", "--effect", "allow"},
		{"egress", "set", "--group", "coder", "--host", "db.example.com:5432", "--effect", "hold"},
		{"egress", "default", "--group", "coder", "--effect", "deny"},
		{"groups", "config", "update", "coder", "--agent-command", "claude -p go", "--agent-env", "LANG=C.UTF-8"},
		{"groups", "update", "coder", "--instructions-file", task},
	} {
		srv.must(t, args...)
	}
	exported := srv.must(t, "export")
	for _, want := range []string{"host: '*.github.com'", "port: 5432", "default: deny", "agentCommand:", "- claude", "LANG: C.UTF-8", "instructions: |"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	if r := srv.applyFile(t, exported, "--dry-run"); r.code != 0 || strings.TrimSpace(r.out) != "No changes." {
		t.Fatalf("export | apply --dry-run: exit %d, %q, want no changes", r.code, r.out)
	}
	for _, args := range [][]string{
		{"egress", "unset", "--group", "coder", "--host", "db.example.com:5432"},
		{"egress", "set", "--group", "coder", "--host", "*.github.com", "--effect", "hold"},
		{"egress", "set", "--group", "coder", "--host", "evil.example", "--effect", "allow"},
		{"egress", "default", "--group", "coder", "--effect", "none"},
		{"groups", "config", "update", "coder", "--agent-command", "", "--agent-env", "LANG=", "--agent-env", "X=1"},
		{"groups", "update", "coder", "--instructions-file", ""},
	} {
		srv.must(t, args...)
	}
	dry := srv.applyFile(t, exported, "--dry-run")
	for _, w := range []string{
		"+ egress rule of group coder: db.example.com:5432 hold",
		"~ egress rule of group coder: hold → *.github.com (443, 80) allow",
		"not deleted without --prune: egress rule of group coder: evil.example (443, 80) allow",
		"~ group coder: egress default hold (not set) → deny",
		"~ group coder: agent command \"claude -p go\", environment LANG",
		"~ group coder: instructions (16 bytes)",
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
}
