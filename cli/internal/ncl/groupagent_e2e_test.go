package ncl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An operator sets a group's agent command, non-secret environment and
// instructions; the runner's own variables cannot be set.
func TestGroupAgentSettings(t *testing.T) {
	srv := startRealServer(t)
	srv.must(t, "groups", "create", "--name", "coder")
	srv.must(t, "groups", "config", "update", "coder", "--agent-command", `["claude","-p","fix the tests"]`,
		"--agent-env", "GIT_AUTHOR_NAME=Coder", "--agent-env", "LANG=C.UTF-8")
	cfg := jsonObj(t, srv.must(t, "groups", "config", "get", "coder", "-o", "json"))
	if cmd, _ := cfg["agent_command"].([]any); len(cmd) != 3 || cmd[2] != "fix the tests" {
		t.Fatalf("agent_command: %v", cfg)
	}
	if env, _ := cfg["agent_env"].(map[string]any); env["GIT_AUTHOR_NAME"] != "Coder" || env["LANG"] != "C.UTF-8" {
		t.Fatalf("agent_env: %v", cfg)
	}
	srv.must(t, "groups", "config", "update", "coder", "--agent-env", "LANG=", "--agent-command", "")
	cfg = jsonObj(t, srv.must(t, "groups", "config", "get", "coder", "-o", "json"))
	if env, _ := cfg["agent_env"].(map[string]any); len(env) != 1 || len(cfg["agent_command"].([]any)) != 0 {
		t.Fatalf("after removing: %v", cfg)
	}
	for _, reserved := range []string{"HTTPS_PROXY=http://evil", "ANTHROPIC_BASE_URL=http://evil", "CLAWGUARD_SESSION_ID=x", "home=/", "ANTHROPIC_AUTH_TOKEN=x"} {
		if r := srv.ncl(t, "groups", "config", "update", "coder", "--agent-env", reserved); r.code == 0 || !strings.Contains(r.err, "runner's own variable") {
			t.Errorf("%s: exit %d %q, want refused", reserved, r.code, r.err)
		}
	}
	task := filepath.Join(t.TempDir(), "task.md")
	if err := os.WriteFile(task, []byte("Fix the flaky test in pkg/x.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.must(t, "groups", "update", "coder", "--instructions-file", task)
	if g := jsonObj(t, srv.must(t, "groups", "get", "coder", "-o", "json")); g["instructions"] != "Fix the flaky test in pkg/x.\n" {
		t.Fatalf("instructions: %v", g["instructions"])
	}
}
