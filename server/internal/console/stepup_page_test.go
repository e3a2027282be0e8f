package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 34: a step-up hold is approved in the console after a fresh
// sign-in; a session signed in longer ago than the step-up window is
// refused in words that say what to do.
func TestAStepUpHoldNeedsAFreshConsoleSignIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := start(t)
	if _, err := f.srv.Operator(t).Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send", StepUp: true}); err != nil {
		t.Fatal(err)
	}
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)

	stale := f.ask(t, "while signed in long ago").GetHoldId()
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE console_sessions SET created_at = now() - interval '1 hour' WHERE user_id = 'telegram:dana'`); err != nil {
		t.Fatal(err)
	}
	resp, body := dana.post("/holds/"+stale+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
	if resp.StatusCode == http.StatusSeeOther || !strings.Contains(body, "step-up") || !strings.Contains(body, "signing in again") {
		t.Fatalf("approve from a session an hour old: %d\n%s", resp.StatusCode, body)
	}

	csrf = dana.signIn(f.dana) // the step-up: a fresh sign-in
	resp, _ = dana.post("/holds/"+stale+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve after a fresh sign-in: %d", resp.StatusCode)
	}
	var st string
	if err := f.srv.Pool.QueryRow(ctx, `SELECT status FROM holds WHERE id = $1`, stale).Scan(&st); err != nil || st != "approved" {
		t.Fatalf("hold after the fresh approval: %s %v", st, err)
	}
}
