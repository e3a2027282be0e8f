package main

import (
	"bytes"
	"strings"
	"testing"
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
