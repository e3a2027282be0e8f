package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 32: the hold page offers "for this session" and "for N hours";
// approving for 1 hour lets the identical send through without a hold, the
// Grants page lists it, and revoking it there holds the next one again.
func TestConsoleStandingGrantApproveListRevoke(t *testing.T) {
	t.Parallel()
	f := start(t)
	held := f.ask(t, "daily digest")
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)
	resp, body := dana.get("/holds/" + held.GetHoldId())
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="standing"`) ||
		!strings.Contains(body, `value="session"`) || !strings.Contains(body, `value="1h"`) {
		t.Fatalf("hold page offers no standing choices: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := dana.post("/holds/"+held.GetHoldId()+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}, "standing": {"1h"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve for 1 hour: %d\n%s", resp.StatusCode, body)
	}
	again := func() *guardv1.DecideResponse {
		t.Helper()
		r, err := f.runner.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "a2a.send",
			Resource: map[string]string{"to": "ops"}, Payload: mustStruct(t, map[string]any{"to": "ops", "text": "daily digest"}),
			Card: &guardv1.HoldCard{Title: "research → ops", Question: "May research message ops?", DeliveryAction: "send_message"}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := again(); r.GetDecision().GetDecidedBy() != "standing grant" || r.GetHoldId() != "" {
		t.Fatalf("the identical send after approving for 1 hour: %v", r)
	}
	resp, body = dana.get("/grants")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "a2a.send") || !strings.Contains(body, `<td data-label="USES">1</td>`) {
		t.Fatalf("/grants: %d\n%s", resp.StatusCode, body)
	}
	id := strings.SplitN(strings.SplitN(body, `<tr class="grant" id="`, 2)[1], `"`, 2)[0]
	eve := newBrowser(t, f.base) // ops' admin: may not resolve research→ops holds
	eve.signIn(f.eve)
	if resp, body := eve.get("/grants"); resp.StatusCode != http.StatusOK || strings.Contains(body, id) || !strings.Contains(body, "no standing grants you may revoke") {
		t.Fatalf("eve's /grants: %d, want none of dana's:\n%s", resp.StatusCode, body)
	}
	if resp, body := dana.post("/grants/revoke", url.Values{"csrf": {csrf}, "id": {id}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d\n%s", resp.StatusCode, body)
	}
	if _, body := dana.get("/grants"); strings.Contains(body, id) {
		t.Fatalf("/grants after the revocation still lists %s", id)
	}
	if r := again(); r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("the identical send after the revocation: %v, want HOLD", r.GetDecision())
	}
}
