package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBadConfigIsOneLineAndExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--runtime", "vm", "--token-file", "/t", "--id", "r"},
		{"--id", "r"},
		{"--bogus"},
	} {
		var stderr bytes.Buffer
		if code := run(args, &stderr); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
		out := strings.TrimSpace(stderr.String())
		if strings.Count(out, "\n") != 0 || !strings.HasPrefix(out, "clawguard-runner: ") {
			t.Fatalf("%v: want one line, got %q", args, out)
		}
	}
}

// TestOneLogFormat: once configured, the runner logs only JSON lines —
// a start failure too — with durations as duration strings, and slog's
// default logger (used by components built without one) is the same.
func TestOneLogFormat(t *testing.T) {
	var stderr bytes.Buffer
	code := run([]string{"--token-file", filepath.Join(t.TempDir(), "missing"), "--id", "r", "--runtime", "process",
		"--agent-binary", "/bin/sh", "--data-dir", t.TempDir()}, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", code, stderr.String())
	}
	slog.Default().Info("from a component without a logger", "backoff", 250*time.Millisecond)
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if l["msg"] == "from a component without a logger" && l["backoff"] != "250ms" {
			t.Errorf("duration logged as %v", l["backoff"])
		}
	}
	if !strings.Contains(stderr.String(), `"msg":"could not start"`) || !strings.Contains(stderr.String(), `"backoff":"250ms"`) {
		t.Fatalf("stderr: %s", stderr.String())
	}
}
