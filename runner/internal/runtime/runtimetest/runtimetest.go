// Package runtimetest holds helpers shared by the runtime implementations'
// tests: building the sleeper test agent and a gateway socket stand-in.
package runtimetest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// BuildSleeper compiles testdata/sleeper as a static binary into a temp dir
// and returns its path.
func BuildSleeper(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sleeper")
	if err := BuildSleeperTo(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// BuildSleeperTo compiles testdata/sleeper as a static binary at out (for
// TestMain, where there is no t).
func BuildSleeperTo(out string) error {
	_, self, _, _ := goruntime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "testdata", "sleeper")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building sleeper: %v\n%s", err, b)
	}
	return nil
}

// Gateway is a unix socket that records the first line of every connection,
// standing in for the agent gateway.
type Gateway struct {
	Path  string
	mu    sync.Mutex
	lines []string
}

// NewGateway listens on a fresh socket, world-connectable so a container's
// non-root user can reach it, closed at cleanup.
func NewGateway(t testing.TB) *Gateway {
	t.Helper()
	// Short dir: unix socket paths are limited to ~108 bytes.
	dir, err := os.MkdirTemp("", "cg-gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Path: filepath.Join(dir, "gateway.sock")}
	ln, err := net.Listen("unix", g.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(g.Path, 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				g.mu.Lock()
				g.lines = append(g.lines, strings.TrimSpace(line))
				g.mu.Unlock()
			}()
		}
	}()
	return g
}

// Lines returns what was received so far.
func (g *Gateway) Lines() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.lines...)
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ReadFileEventually waits for path to exist and returns its contents.
func ReadFileEventually(t testing.TB, within time.Duration, path string) []byte {
	t.Helper()
	var b []byte
	Eventually(t, within, path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	return b
}
