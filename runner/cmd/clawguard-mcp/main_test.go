package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A socket path that cannot be the session's is refused at once, saying
// what to give instead; the session's socket is taken.
func TestSocketPathRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	os.WriteFile(file, nil, 0o600)
	for path, want := range map[string]string{
		".data/run/sockets/s.sock":      "not an absolute path",
		filepath.Join(dir, "none.sock"): "no gateway socket at",
		file:                            "is not a unix socket",
	} {
		if err := checkSocket(path); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "CLAWGUARD_GATEWAY_SOCKET") {
			t.Errorf("checkSocket(%q) = %v, want %q naming the variable", path, err, want)
		}
	}
	sock := filepath.Join(dir, "g.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := checkSocket(sock); err != nil {
		t.Fatalf("the session's socket: %v", err)
	}
}
