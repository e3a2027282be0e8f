package telegram

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clawguard/clawguard/cli/internal/bridge/bridgetest"
)

// The clawguard-telegram binary: configured by CLAWGUARD_* environment
// alone (secrets from a file and the environment), JSON logs on stderr,
// SIGTERM a clean exit 0 and a restart that carries on where it stopped.
func TestBinaryConfiguredByEnvLogsJSONAndStopsCleanly(t *testing.T) {
	e := newEnv(t)
	dana := e.user(danaID, "owner", "")
	bin := bridgetest.BuildBridge(t, "github.com/clawguard/clawguard/cli/cmd/clawguard-telegram")
	botFile := filepath.Join(t.TempDir(), "bot.token")
	if err := os.WriteFile(botFile, []byte(e.tg.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() func() string {
		return e.Run(bin, []string{
			"CLAWGUARD_SERVER=" + e.Srv.Addr, "CLAWGUARD_TOKEN=" + e.BridgeToken,
			"CLAWGUARD_TELEGRAM_BOT_TOKEN_FILE=" + botFile, "CLAWGUARD_TELEGRAM_API_URL=" + e.tg.srv.URL,
			"CLAWGUARD_DATA_DIR=" + e.dataDir, "CLAWGUARD_HTTP_LISTEN=127.0.0.1:0", "CLAWGUARD_POLL_TIMEOUT=1s",
		}, "telegram bridge starting", e.tg.token, e.BridgeToken)
	}
	request := func(title string) string { return e.RequestFor(dana, title) }

	stop := run()
	first := request("first")
	e.card(danaID, first)
	stop()

	second := request("second, while stopped")
	stop = run()
	e.card(danaID, second)
	e.card(danaID, first) // still one
	stop()
	if got := len(e.tg.cards()); got != 2 {
		t.Fatalf("%d cards for 2 holds across a restart of the binary", got)
	}
}
