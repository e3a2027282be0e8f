package bridge

import (
	"os"
	"path/filepath"
	"testing"
)

// A state file the Telegram bridge wrote before the shared core (chat and
// message ids as JSON numbers) is read on upgrade: its cards are still
// edited when their holds resolve, and its offsets carry on.
func TestAnOlderTelegramStateFileIsRead(t *testing.T) {
	dir := t.TempDir()
	old := `{
  "update_offset": 1012,
  "watch_cursor": 57,
  "outbox_cursor": 3,
  "cards": {
    "hold_1": [{"chat_id": -1001, "message_id": 7, "text": "🔐 Use the deploy key\n(hold_1)"}]
  }
}`
	if err := os.WriteFile(filepath.Join(dir, "telegram-state.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dir, "telegram")
	if err != nil {
		t.Fatal(err)
	}
	s := st.snapshot()
	if s.InboundOffset != 1012 || s.WatchCursor != 57 || s.OutboxCursor != 3 {
		t.Fatalf("offsets %+v", s)
	}
	if c := st.cards("hold_1"); len(c) != 1 || c[0].Chat != "-1001" || c[0].Message != "7" || c[0].Text == "" {
		t.Fatalf("cards %+v", c)
	}
	// Written back and read again (ids as strings now: a Slack ts is one).
	if err := st.update(func(s *State) { s.Cards["hold_2"] = []Card{{Chat: "UDANA", Message: "1700000000.000100", Text: "x"}} }); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(dir, "telegram")
	if err != nil {
		t.Fatal(err)
	}
	if c := again.cards("hold_2"); len(c) != 1 || c[0].Message != "1700000000.000100" {
		t.Fatalf("cards after a rewrite %+v", c)
	}
	if c := again.cards("hold_1"); len(c) != 1 || c[0].Chat != "-1001" {
		t.Fatalf("old cards after a rewrite %+v", c)
	}
	for _, bad := range []string{`{"cards": {"h": [{"chat_id": 1.5}]}}`, `{"cards": {"h": [{"chat_id": true}]}}`} {
		if err := os.WriteFile(filepath.Join(dir, "telegram-state.json"), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openStore(dir, "telegram"); err == nil {
			t.Errorf("state %s read without an error", bad)
		}
	}
}
