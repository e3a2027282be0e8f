package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 32: the console freezes and unfreezes, as the signed-in user: an
// owner any scope, a group's admin their group only; the agent is denied
// while frozen.
func TestConsoleFreezesAndUnfreezes(t *testing.T) {
	t.Parallel()
	f := start(t)
	olga := newBrowser(t, f.base)
	csrf := olga.signIn(f.olga)
	if resp, _ := olga.post("/freezes", url.Values{"csrf": {csrf}, "scope": {"group"}, "target": {"research"}, "reason": {"incident 42"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("freeze research by name: %d", resp.StatusCode)
	}
	resp, body := olga.get("/freezes")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "group research") || !strings.Contains(body, "incident 42") {
		t.Fatalf("/freezes after the freeze: %d\n%s", resp.StatusCode, body)
	}
	ask := func() *guardv1.Decision {
		r, err := f.runner.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": "ops"}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetDecision()
	}
	if d := ask(); d.GetEffect() != guardv1.Effect_EFFECT_DENY || !strings.Contains(d.GetReason(), "frozen") {
		t.Fatalf("research's agent while frozen: %v", d)
	}

	eve := newBrowser(t, f.base) // ops' admin, not research's
	ecsrf := eve.signIn(f.eve)
	resp, body = eve.post("/freezes/unfreeze", url.Values{"csrf": {ecsrf}, "scope": {"group"}, "target": {"research"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "needs an admin of it") {
		t.Fatalf("ops' admin lifting research's freeze: %d", resp.StatusCode)
	}
	resp, body = eve.post("/freezes", url.Values{"csrf": {ecsrf}, "scope": {"all"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "needs the operator, an owner or a global admin") {
		t.Fatalf("a group admin freezing the fleet: %d", resp.StatusCode)
	}
	if resp, _ := olga.post("/freezes", url.Values{"scope": {"all"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a freeze without CSRF: %d", resp.StatusCode)
	}

	if resp, _ := olga.post("/freezes/unfreeze", url.Values{"csrf": {csrf}, "scope": {"group"}, "target": {"research"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("unfreeze: %d", resp.StatusCode)
	}
	if _, body = olga.get("/freezes"); !strings.Contains(body, "nothing is frozen") {
		t.Fatalf("/freezes after the unfreeze:\n%s", body)
	}
	if d := ask(); strings.Contains(d.GetReason(), "frozen") {
		t.Fatalf("after the unfreeze: %v", d)
	}
}
