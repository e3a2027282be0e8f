package telegram

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

// The clawguard-telegram binary: configured by CLAWGUARD_* environment
// alone (secrets from a file and the environment), JSON logs on stderr,
// SIGTERM a clean exit 0 and a restart that carries on where it stopped.
func TestBinaryConfiguredByEnvLogsJSONAndStopsCleanly(t *testing.T) {
	e := newEnv(t)
	dana := e.user(danaID, "owner", "")
	bin := filepath.Join(t.TempDir(), "clawguard-telegram")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/clawguard/clawguard/cli/cmd/clawguard-telegram").CombinedOutput(); err != nil {
		t.Fatalf("build clawguard-telegram: %v\n%s", err, out)
	}
	botFile := filepath.Join(t.TempDir(), "bot.token")
	if err := os.WriteFile(botFile, []byte(e.tg.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() (stop func() string) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"CLAWGUARD_SERVER="+e.srv.Addr, "CLAWGUARD_TOKEN="+e.bridgeTk,
			"CLAWGUARD_TELEGRAM_BOT_TOKEN_FILE="+botFile, "CLAWGUARD_TELEGRAM_API_URL="+e.tg.srv.URL,
			"CLAWGUARD_DATA_DIR="+e.dataDir, "CLAWGUARD_HTTP_LISTEN=127.0.0.1:0", "CLAWGUARD_POLL_TIMEOUT=1s")
		stderr := &clitest.SyncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		e.eventually(wait, "the bridge started", func() bool { return strings.Contains(stderr.String(), "telegram bridge starting") })
		return func() string {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("clawguard-telegram after SIGTERM: %v\n%s", err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("clawguard-telegram did not stop on SIGTERM\n%s", stderr.String())
			}
			return stderr.String()
		}
	}
	request := func(title string) string { return e.requestFor(dana, title) }

	stop := run()
	first := request("first")
	e.card(danaID, first)
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
	if lines == 0 || strings.Contains(logs, e.tg.token) || strings.Contains(logs, e.bridgeTk) {
		t.Fatalf("%d log lines; a secret in the logs: %v", lines, strings.Contains(logs, e.tg.token) || strings.Contains(logs, e.bridgeTk))
	}

	second := request("second, while stopped")
	stop = run()
	e.card(danaID, second)
	e.card(danaID, first) // still one
	stop()
	if got := len(e.tg.cards()); got != 2 {
		t.Fatalf("%d cards for 2 holds across a restart of the binary", got)
	}
}
