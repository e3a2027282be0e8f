package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A quorum on the hold's page: who approved, who no longer counts.

// A policy quorum: Dana's approval counts once and leaves the hold pending
// (her page says so, without an Approve button); the second named approver
// completes it.
func TestQuorumHoldOnTheCard(t *testing.T) {
	f := start(t)
	if _, err := f.srv.Pool.Exec(context.Background(), `UPDATE agent_message_policies SET also_approvers = ARRAY['telegram:eve'], approvals = 2`); err != nil {
		t.Fatal(err)
	}
	hold := f.ask(t, "two keys").GetHoldId()
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)
	if resp, _ := dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("Dana's approval: %d", resp.StatusCode)
	}
	_, page := dana.get("/holds/" + hold)
	for _, want := range []string{"1 of 2 approvals — telegram:dana", "You approved", "only telegram:dana, telegram:eve", "to=ops"} {
		if !strings.Contains(page, want) {
			t.Fatalf("Dana's page after her approval lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, `id="approve"`) {
		t.Fatal("Dana is offered a second approval")
	}
	eve := newBrowser(t, f.base)
	csrf = eve.signIn(f.eve)
	if resp, _ := eve.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("Eve's approval: %d", resp.StatusCode)
	}
	var st string
	_ = f.srv.Pool.QueryRow(context.Background(), `SELECT status FROM holds WHERE id = $1`, hold).Scan(&st)
	if st != "approved" {
		t.Fatalf("after both approvals the hold is %s", st)
	}
}

// An approval that no longer counts (the policy stopped naming its
// approver while the hold was partial) is shown, marked, and not counted.
func TestQuorumHoldShowsWhoNoLongerCounts(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	op := f.srv.Operator(t)
	setPolicy := func(approver string, also ...string) {
		t.Helper()
		if _, err := op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: "research", ToGroup: "ops",
			ApproverUserId: approver, AlsoApproverUserIds: also, Approvals: 2}); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy("telegram:dana", "telegram:eve")
	hold := f.ask(t, "two keys").GetHoldId()
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)
	if resp, _ := dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("Dana's approval: %d", resp.StatusCode)
	}
	setPolicy("telegram:eve", "telegram:olga")
	eve := newBrowser(t, f.base)
	eve.signIn(f.eve)
	_, page := eve.get("/holds/" + hold)
	for _, want := range []string{"0 of 2 approvals — telegram:dana", "(no longer eligible: not counted)", "only telegram:eve, telegram:olga", `id="approve"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("Eve's page after the policy change lacks %q:\n%s", want, page)
		}
	}
}
