package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/migrations/pgtest"
)

// Issue 33: the server takes its settings from a YAML file (keys: the flags'
// names), below the command line and the environment; a key that is no
// setting is refused with its line.
func TestServerReadsItsConfigFile(t *testing.T) {
	dir := t.TempDir()
	addr, metrics, fileMetrics := loopback(t), loopback(t), loopback(t)
	cfg := filepath.Join(dir, "server.yaml")
	body := fmt.Sprintf("database-url: %s\nauto-migrate: true\nlisten: %s\nmetrics-listen: %s\noperator-token-file: %s\nlog-level: debug\n",
		pgtest.NewDB(t), addr, fileMetrics, filepath.Join(dir, "operator.token"))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// The command line wins over the file's metrics-listen; the
	// environment over its log-level.
	srv := start(t, "server", []string{"CLAWGUARD_LOG_LEVEL=warn"}, bin(t, "clawguard-server"), "serve", "--config", cfg, "--metrics-listen", metrics)
	waitFor(t, 60*time.Second, "/readyz 200 on the command line's metrics address", func() (bool, string) {
		if srv.Exited() {
			t.Fatalf("server exited:\n%s", srv.Tail(30))
		}
		code, err := httpStatus("http://" + metrics + "/readyz")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, err)
	})
	if _, err := httpStatus("http://" + fileMetrics + "/readyz"); err == nil {
		t.Error("the file's metrics-listen was used though the command line set it")
	}
	if tail := srv.Tail(50); strings.Contains(tail, `"level":"DEBUG"`) || strings.Contains(tail, `"level":"INFO"`) {
		t.Errorf("log level: the environment's warn should win over the file's debug:\n%s", tail)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:1\nlisen: typo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "bad", nil, bin(t, "clawguard-server"), "serve", "--config", bad)
	waitFor(t, 30*time.Second, "the bad config refused", func() (bool, string) { return p.Exited(), p.Tail(5) })
	if tail := p.Tail(5); !strings.Contains(tail, `line 2: "lisen" is not a setting`) {
		t.Errorf("a typo in the config file: %s", tail)
	}
}
