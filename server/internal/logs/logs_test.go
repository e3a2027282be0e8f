package logs

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDurationsAsStringsAndSecretsRedacted(t *testing.T) {
	dsn := "postgres://app:s3cret-pw@db:5432/clawguard?sslmode=require&password=q-pass"
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo, URLSecrets(dsn)...)
	log.Info("retrying", "in", 1500*time.Millisecond, "url", dsn,
		"err", errors.New(`connect to "`+dsn+`": refused`), "ok", "plain")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q", buf.String())
	}
	if line["in"] != "1.5s" {
		t.Errorf("duration logged as %v, want \"1.5s\"", line["in"])
	}
	if strings.Contains(buf.String(), "s3cret-pw") || strings.Contains(buf.String(), "q-pass") {
		t.Errorf("a secret leaked: %s", buf.String())
	}
	if line["ok"] != "plain" || !strings.Contains(line["err"].(string), "refused") {
		t.Errorf("unrelated values changed: %s", buf.String())
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h/db?sslmode=disable":       "postgres://u:xxxxx@h/db?sslmode=disable",
		"postgres://u@h/db?password=pw&sslmode=none": "postgres://u@h/db?password=xxxxx&sslmode=none",
		"https://hook.example/x?token=t0k":           "https://hook.example/x?token=xxxxx",
		"postgres://h/db":                            "postgres://h/db",
		"":                                           "",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
