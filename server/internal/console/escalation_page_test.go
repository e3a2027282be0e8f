package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 32: the Policies page shows a policy's escalation; a hold page says
// when it was reminded and escalated, to whom, and the escalated approver
// (olga) sees it and may decide it only after the escalation.
func TestEscalationOnThePoliciesAndHoldPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := start(t)
	if _, err := f.srv.Operator(t).Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: "research", ToGroup: "ops", ApproverUserId: "telegram:dana",
		RemindAfter: durationpb.New(10 * time.Minute), EscalateAfter: durationpb.New(30 * time.Minute), EscalateTo: []string{"telegram:olga"}}); err != nil {
		t.Fatal(err)
	}
	dana := newBrowser(t, f.base)
	dana.signIn(f.dana)
	if _, page := dana.get("/policies"); !strings.Contains(page, "remind after 10m0s; add telegram:olga after 30m0s") {
		t.Fatalf("Policies page lacks the escalation:\n%s", page)
	}
	hold := f.ask(t, "escalate me").GetHoldId()
	olga := newBrowser(t, f.base)
	olga.signIn(f.olga)
	if _, page := olga.get("/holds/" + hold); strings.Contains(page, `id="escalated"`) || strings.Contains(page, "escalate me") {
		t.Fatalf("olga sees the hold before its escalation:\n%s", page)
	}
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE holds SET remind_at = now() - interval '1 second', escalate_at = now() - interval '1 second' WHERE id = $1`, hold); err != nil {
		t.Fatal(err)
	}
	// The server's own sweep runs meanwhile: either takes each step, once.
	if _, err := f.srv.Deps().Approvals.EscalateDue(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	testserver.Eventually(t, 10*time.Second, "the reminder and the escalation taken", func() bool {
		var n int
		_ = f.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = $1 AND reminded_at IS NOT NULL AND escalated_at IS NOT NULL`, hold).Scan(&n)
		return n == 1
	})
	_, page := olga.get("/holds/" + hold)
	for _, want := range []string{`id="reminded"`, `id="escalated"`, "to telegram:olga", "added by its escalation"} {
		if !strings.Contains(page, want) {
			t.Errorf("hold page after the escalation lacks %q:\n%s", want, page)
		}
	}
}
