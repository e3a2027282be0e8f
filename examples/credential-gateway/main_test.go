package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{}, {"--group", "ag_1"}, {"--group", "ag_1", "--credential", "github"}, {"--nope"}} {
		if code := run(args); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
}

// A server that never answers: the deadline passes undecided and the
// credential is not used (exit 1, not 0).
func TestNoAnswerFailsClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks gRPC
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("cg_bridge_test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLAWGUARD_SERVER", l.Addr().String())
	t.Setenv("CLAWGUARD_TOKEN_FILE", tok)
	if code := run([]string{"--group", "ag_1", "--credential", "github", "--action", "GET /user", "--deadline", "1500ms", "--margin", "500ms"}); code != 1 {
		t.Fatalf("exit %d, want 1 (no answer: credential not used)", code)
	}
}
