package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// The usage page shows what the groups the user may read used of their
// models, per day and in total; another group's usage is not shown.
func TestConsoleUsagePage(t *testing.T) {
	t.Parallel()
	f := start(t)
	if _, err := f.srv.Pool.Exec(context.Background(), `INSERT INTO model_usage (agent_group_id, day, provider, model, calls, input_tokens,
			output_tokens, cache_read_tokens, cache_write_tokens, cost_micros) VALUES
		('research', current_date, 'anthropic', 'claude-sonnet-4-5', 3, 1200, 300, 40, 0, 8100000),
		('research', current_date - 1, 'anthropic', 'claude-sonnet-4-5', 2, 800, 100, 0, 0, 3900000),
		('ops', current_date, 'openai', 'gpt-5-secret-model', 1, 10, 10, 0, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	dana := newBrowser(t, f.base)
	dana.signIn(f.dana)
	resp, body := dana.get("/usage")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "claude-sonnet-4-5") || !strings.Contains(body, "8.100000") ||
		!strings.Contains(body, `<td data-label="DAY">total</td>`) || !strings.Contains(body, `<td data-label="CALLS">5</td>`) ||
		!strings.Contains(body, `<td data-label="COST">12.000000</td>`) {
		t.Fatalf("/usage: %d\n%s", resp.StatusCode, body)
	}
	if strings.Contains(body, "gpt-5-secret-model") {
		t.Fatal("dana sees ops' usage")
	}
	if resp, body := dana.get("/usage?group=ops"); resp.StatusCode == http.StatusOK && strings.Contains(body, "gpt-5-secret-model") {
		t.Fatalf("?group=ops: %d shows ops' usage", resp.StatusCode)
	}
}
