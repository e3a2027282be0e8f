package slack

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawguard/clawguard/cli/internal/clitest"
)

// The clawguard-slack binary: --version, configured by CLAWGUARD_*
// environment alone (secrets from files and the environment), JSON logs on
// stderr without a secret, SIGTERM a clean exit 0 and a restart that
// carries on where it stopped.
func TestBinaryConfiguredByEnvLogsJSONAndStopsCleanly(t *testing.T) {
	e := newEnv(t)
	danaID := e.user(dana, "owner", "")
	bin := filepath.Join(t.TempDir(), "clawguard-slack")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9-test", "-o", bin,
		"github.com/clawguard/clawguard/cli/cmd/clawguard-slack").CombinedOutput(); err != nil {
		t.Fatalf("build clawguard-slack: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || strings.TrimSpace(string(out)) != "v9.9.9-test" {
		t.Fatalf("--version: %q %v", out, err)
	}
	botFile := filepath.Join(t.TempDir(), "bot.token")
	if err := os.WriteFile(botFile, []byte(e.sl.botToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() (stop func() string) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"CLAWGUARD_SERVER="+e.srv.Addr, "CLAWGUARD_TOKEN="+e.bridgeTk,
			"CLAWGUARD_SLACK_BOT_TOKEN_FILE="+botFile, "CLAWGUARD_SLACK_APP_TOKEN="+e.sl.appToken,
			"CLAWGUARD_SLACK_API_URL="+e.sl.apiURL(), "CLAWGUARD_DATA_DIR="+e.dataDir, "CLAWGUARD_HTTP_LISTEN=127.0.0.1:0")
		stderr := &clitest.SyncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		e.eventually(wait, "the bridge started", func() bool { return strings.Contains(stderr.String(), "slack bridge starting") })
		return func() string {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("clawguard-slack after SIGTERM: %v\n%s", err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("clawguard-slack did not stop on SIGTERM\n%s", stderr.String())
			}
			return stderr.String()
		}
	}

	stop := run()
	first := e.requestFor(danaID, "first")
	e.card(dana, first)
	logs := stop()
	sc := bufio.NewScanner(strings.NewReader(logs))
	lines := 0
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", sc.Text())
		}
		if rec["level"] == nil || rec["msg"] == nil {
			t.Fatalf("a log record lacks level or msg: %v", rec)
		}
		lines++
	}
	for _, secret := range []string{e.sl.botToken, e.sl.appToken, e.bridgeTk} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a secret in the logs:\n%s", logs)
		}
	}
	if lines == 0 {
		t.Fatal("no log lines")
	}

	second := e.requestFor(danaID, "second, while stopped")
	stop = run()
	e.card(dana, second)
	e.card(dana, first) // still one
	stop()
	if got := len(e.sl.cards()); got != 2 {
		t.Fatalf("%d cards for 2 holds across a restart of the binary", got)
	}
}
