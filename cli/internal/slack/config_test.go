package slack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigSecretsComeFromFilesOrEnvNeverFlags(t *testing.T) {
	dir := t.TempDir()
	bot := filepath.Join(dir, "bot")
	if err := os.WriteFile(bot, []byte("xoxb-1-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]string{"--slack-bot-token-file", bot, "--slack-api-url", "http://127.0.0.1:1/api"},
		envMap(map[string]string{"CLAWGUARD_TOKEN": "cg_bridge", "CLAWGUARD_SLACK_APP_TOKEN": "xapp-1", "CLAWGUARD_DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	if c.BotToken != "xoxb-1-2" || c.AppToken != "xapp-1" || c.Token != "cg_bridge" || c.DataDir != dir || c.apiURL() != "http://127.0.0.1:1/api/" {
		t.Fatalf("config %+v", c)
	}
	if d := Default(); d.HTTPListen == "127.0.0.1:9466" || d.DataDir == ".data/telegram" {
		t.Fatalf("defaults %+v collide with the Telegram bridge's", d)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--slack-bot-token", "xoxb-1"}, nil, "flag provided but not defined"},
		{nil, map[string]string{"CLAWGUARD_TOKEN": "a", "CLAWGUARD_SLACK_APP_TOKEN": "xapp-1"}, "CLAWGUARD_SLACK_BOT_TOKEN"},
		{nil, map[string]string{"CLAWGUARD_TOKEN": "a", "CLAWGUARD_SLACK_BOT_TOKEN": "xoxb-1"}, "CLAWGUARD_SLACK_APP_TOKEN"},
		// The two tokens swapped.
		{nil, map[string]string{"CLAWGUARD_TOKEN": "a", "CLAWGUARD_SLACK_BOT_TOKEN": "xapp-1", "CLAWGUARD_SLACK_APP_TOKEN": "xoxb-1"}, "xoxb-"},
		{[]string{"--slack-api-url", "ftp://x"}, map[string]string{"CLAWGUARD_TOKEN": "a", "CLAWGUARD_SLACK_BOT_TOKEN": "xoxb-1", "CLAWGUARD_SLACK_APP_TOKEN": "xapp-1"}, "slack-api-url"},
	} {
		_, err := Parse(tc.args, envMap(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v, %v): %v, want an error naming %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestUserIDsAreSlacksShapeOnly(t *testing.T) {
	for _, ok := range []string{"U0123ABCD", "W012ABC", "UDANA"} {
		if !isUser(ok) {
			t.Errorf("%q not taken for a user id", ok)
		}
	}
	for _, bad := range []string{"", "U", "C0123", "D0123", "u0123", "U01 23", "U0123,U0456", "dana"} {
		if isUser(bad) {
			t.Errorf("%q taken for a user id", bad)
		}
	}
}
