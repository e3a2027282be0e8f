package telegram

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
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

func TestCallbackDataRoundTripsAndFitsTelegramsLimit(t *testing.T) {
	d := callbackData("hold_0123456789abcdef0123", 12)
	if len(d) > 64 {
		t.Fatalf("callback data %q is %d bytes; Telegram allows 64", d, len(d))
	}
	id, i, ok := parseCallbackData(d)
	if !ok || id != "hold_0123456789abcdef0123" || i != 12 {
		t.Fatalf("parsed %q %d %v", id, i, ok)
	}
	for _, bad := range []string{"", "x:1", "h:", "h:id", "h:id:-1", "h:id:x"} {
		if _, _, ok := parseCallbackData(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A card goes to the delivered-to approver, every further approver a quorum
// hold was delivered to, and every named approver of an exclusive rule —
// Telegram users only, each once.
func TestRecipientsCoverEveryApproverAQuorumNeeds(t *testing.T) {
	h := &guardv1.Hold{
		DeliveredTo:     "telegram:1",
		AlsoDeliveredTo: []string{"telegram:2", "slack:x", "telegram:1"},
		ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{
			UserId: "telegram:3", AlsoUserIds: []string{"telegram:2", "telegram:4"}}}},
	}
	got := recipients(h)
	want := []string{"telegram:1", "telegram:2", "telegram:3", "telegram:4"}
	if !slices.Equal(got, want) {
		t.Fatalf("recipients %v, want %v", got, want)
	}
}
