package telegram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigSecretsComeFromFilesOrEnvNeverFlags(t *testing.T) {
	dir := t.TempDir()
	bot := filepath.Join(dir, "bot")
	if err := os.WriteFile(bot, []byte("123:abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]string{"--telegram-bot-token-file", bot, "--poll-timeout", "5s"},
		envMap(map[string]string{"CLAWGUARD_TOKEN": "cg_bridge", "CLAWGUARD_SERVER": "10.0.0.1:7443", "CLAWGUARD_DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	if c.BotToken != "123:abc" || c.Token != "cg_bridge" || c.Server != "10.0.0.1:7443" || c.PollTimeout != 5*time.Second || c.DataDir != dir {
		t.Fatalf("config %+v", c)
	}
	// There is no flag that takes a secret's value.
	if _, err := Parse([]string{"--telegram-bot-token", "123:abc"}, envMap(nil)); err == nil {
		t.Fatal("a --telegram-bot-token flag was accepted")
	}
	_, err = Parse(nil, envMap(map[string]string{"CLAWGUARD_TOKEN": "cg_bridge"}))
	if err == nil || !strings.Contains(err.Error(), "CLAWGUARD_TELEGRAM_BOT_TOKEN") {
		t.Fatalf("no bot token: %v, want an error naming CLAWGUARD_TELEGRAM_BOT_TOKEN", err)
	}
	_, err = Parse([]string{"--telegram-api-url", "ftp://x"}, envMap(map[string]string{"CLAWGUARD_TOKEN": "a", "CLAWGUARD_TELEGRAM_BOT_TOKEN": "b"}))
	if err == nil || !strings.Contains(err.Error(), "telegram-api-url") {
		t.Fatalf("bad API URL: %v", err)
	}
}
