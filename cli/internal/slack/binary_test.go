package slack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clawguard/clawguard/cli/internal/bridge/bridgetest"
)

// The clawguard-slack binary: --version, configured by CLAWGUARD_*
// environment alone (secrets from files and the environment), JSON logs on
// stderr without a secret, SIGTERM a clean exit 0 and a restart that
// carries on where it stopped.
func TestBinaryConfiguredByEnvLogsJSONAndStopsCleanly(t *testing.T) {
	e := newEnv(t)
	danaID := e.User(dana, "owner", "")
	bin := bridgetest.BuildBridge(t, "github.com/clawguard/clawguard/cli/cmd/clawguard-slack")
	botFile := filepath.Join(t.TempDir(), "bot.token")
	if err := os.WriteFile(botFile, []byte(e.sl.botToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() func() string {
		return e.Run(bin, []string{
			"CLAWGUARD_SERVER=" + e.Srv.Addr, "CLAWGUARD_TOKEN=" + e.BridgeToken,
			"CLAWGUARD_SLACK_BOT_TOKEN_FILE=" + botFile, "CLAWGUARD_SLACK_APP_TOKEN=" + e.sl.appToken,
			"CLAWGUARD_SLACK_API_URL=" + e.sl.apiURL(), "CLAWGUARD_DATA_DIR=" + e.dataDir, "CLAWGUARD_HTTP_LISTEN=127.0.0.1:0",
		}, "slack bridge starting", e.sl.botToken, e.sl.appToken, e.BridgeToken)
	}

	stop := run()
	first := e.RequestFor(danaID, "first")
	e.card(dana, first)
	stop()

	second := e.RequestFor(danaID, "second, while stopped")
	stop = run()
	e.card(dana, second)
	e.card(dana, first) // still one
	stop()
	if got := len(e.sl.cards()); got != 2 {
		t.Fatalf("%d cards for 2 holds across a restart of the binary", got)
	}
}
