package approvals_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Quorum (issue 18): a hold may need M approvals from distinct eligible
// approvers; every click is checked by mayResolve (D1 included), the same
// person counts once, one reject rejects, and the grant exists only when
// the quorum is met.

func approve(t *testing.T, srv *testserver.Server, id, user string) (*guardv1.Hold, error) {
	t.Helper()
	resp, err := userClients(t, srv, user).Approvals.Resolve(context.Background(),
		&guardv1.ResolveRequest{Id: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE})
	return resp.GetHold(), err
}

func eventTypes(t *testing.T, srv *testserver.Server, id string) []string {
	t.Helper()
	rows, err := srv.Pool.Query(context.Background(), `SELECT type FROM hold_events WHERE hold_id = $1 ORDER BY cursor`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func globalNeeds(n int) testserver.Option {
	return func(c *config.Config) { c.GlobalHoldApprovals = n }
}

// 2 of 3: a global hold needs two approvals; the scoped admin's click is
// refused under D1 and counts for nothing; a double click counts once.
func TestQuorumTwoApprovalsWithD1(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, globalNeeds(2))
	seed(t, srv)
	var mu sync.Mutex
	ran := 0
	srv.Deps().Approvals.OnApproved("test_quorum", func(context.Context, *guardv1.Hold) error {
		mu.Lock()
		defer mu.Unlock()
		ran++
		return nil
	})
	exec(t, srv.Pool, `INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, 'slack', 'o'), ($2, 'slack', 'g'), ($3, 'slack', 's')`,
		owner, globalAdmin, scopedAdmin)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_quorum", SessionID: "sess-1", Scope: global, Title: "grant owner"})
	if h.GetApprovalsRequired() != 2 {
		t.Fatalf("approvals_required = %d, want 2", h.GetApprovalsRequired())
	}
	// The card reaches enough approvers to meet the quorum: the other
	// eligible one with a DM too (the scoped admin is not eligible here).
	if h.GetDeliveredTo() != globalAdmin || len(h.GetAlsoDeliveredTo()) != 1 || h.GetAlsoDeliveredTo()[0] != owner {
		t.Fatalf("delivered to %q and %v, want %s and [%s]", h.GetDeliveredTo(), h.GetAlsoDeliveredTo(), globalAdmin, owner)
	}
	if _, err := approve(t, srv, h.Id, scopedAdmin); code(err) != codes.PermissionDenied {
		t.Fatalf("scoped admin on a global hold: %v, want PermissionDenied", err)
	}
	got, err := approve(t, srv, h.Id, owner)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING || len(got.GetApprovals()) != 1 || got.GetApprovals()[0].GetUserId() != owner {
		t.Fatalf("after one approval: %v", got)
	}
	// The same approver again: counted once, nothing published.
	if got, err = approve(t, srv, h.Id, owner); err != nil || len(got.GetApprovals()) != 1 || got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("double click: %v %v", got, err)
	}
	if pendingStatus(t, srv, h.Id) != "pending" || ran != 0 {
		t.Fatal("the grant exists before the quorum is met")
	}
	got, err = approve(t, srv, h.Id, globalAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED || len(got.GetApprovals()) != 2 || got.GetResolver() != globalAdmin {
		t.Fatalf("after the quorum: %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran != 1 {
		t.Fatalf("approved handler ran %d times, want 1", ran)
	}
	if ev := eventTypes(t, srv, h.Id); len(ev) != 3 || ev[0] != "requested" || ev[1] != "approved_partial" || ev[2] != "resolved" {
		t.Fatalf("events %v", ev)
	}
	var remaining int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT approvals_remaining FROM hold_events WHERE hold_id = $1 AND type = 'approved_partial'`, h.Id).Scan(&remaining); err != nil || remaining != 1 {
		t.Fatalf("approved_partial remaining = %d (%v), want 1", remaining, err)
	}
	if n := testutil.ToFloat64(srv.Deps().Metrics.ApprovalsPartialTotal.WithLabelValues("test_quorum")); n != 1 {
		t.Fatalf("partial approvals metric = %v", n)
	}
}

// The quorum is the largest of scope default, action setting and group
// setting; a hold that cannot reach it is not created and says why.
func TestQuorumSourcesAndUnreachableQuorum(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	exec(t, srv.Pool, `INSERT INTO action_settings (action, approvals) VALUES ('test.action', 2)`)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_q", CatalogAction: "test.action", SessionID: "sess-1", Scope: group, Title: "t"})
	if h.GetApprovalsRequired() != 2 {
		t.Fatalf("action setting: approvals_required = %d, want 2", h.GetApprovalsRequired())
	}
	op := srv.Operator(t)
	three := int32(3)
	if _, err := op.Registry.UpdateGroupConfig(context.Background(), &guardv1.UpdateGroupConfigRequest{Group: "ag-1", HoldApprovals: &three}); err != nil {
		t.Fatal(err)
	}
	h = createOn(t, srv, approvals.CreateRequest{Kind: "test_q2", CatalogAction: "test.action", SessionID: "sess-1", Scope: group, Title: "t"})
	if h.GetApprovalsRequired() != 3 {
		t.Fatalf("group setting: approvals_required = %d, want 3", h.GetApprovalsRequired())
	}
	// A card of choices (channel registration) is decided by one pick.
	h = createOn(t, srv, approvals.CreateRequest{Kind: "test_choice", CatalogAction: "test.action", SessionID: "sess-1", Scope: group, Title: "t",
		Options: []*guardv1.HoldOption{{Label: "New agent", Value: "new_agent"}, {Label: "Reject", Value: "reject"}}})
	if h.GetApprovalsRequired() != 1 {
		t.Fatalf("choice card: approvals_required = %d, want 1", h.GetApprovalsRequired())
	}
	// Global scope: only the owner and the global admin are eligible.
	res := create(t, srv.Deps().Approvals, srv.Pool, approvals.CreateRequest{Kind: "test_q3", SessionID: "sess-1", Scope: global, Title: "t"})
	if !res.NoApprover || res.Hold != nil {
		t.Fatalf("3 approvals from 2 eligible approvers: %+v", res)
	}
	// The reason names the setting the quorum comes from, who may approve,
	// and the fix (issue 41).
	if !strings.HasPrefix(res.Reason, "it needs 3 distinct approvals, from group ag-1's hold approvals") ||
		!strings.Contains(res.Reason, "only 2 eligible approver(s) exist (slack:global-admin, slack:owner)") || !strings.Contains(res.Reason, "fix: ") {
		t.Fatalf("reason %q", res.Reason)
	}
}

// One reject rejects, whatever approvals came before; an expired partial
// hold expires whole.
func TestQuorumRejectAndExpiryEndThePartialHold(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, func(c *config.Config) { c.GroupHoldApprovals = 2 })
	seed(t, srv)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_qr", SessionID: "sess-1", Scope: group, Title: "t"})
	if _, err := approve(t, srv, h.Id, scopedAdmin); err != nil {
		t.Fatal(err)
	}
	resp, err := userClients(t, srv, owner).Approvals.Resolve(context.Background(),
		&guardv1.ResolveRequest{Id: h.Id, Outcome: guardv1.Outcome_OUTCOME_REJECT, Reason: "no"})
	if err != nil || resp.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_REJECTED {
		t.Fatalf("reject after one approval: %v %v", resp, err)
	}
	if _, err := approve(t, srv, h.Id, globalAdmin); code(err) != codes.FailedPrecondition {
		t.Fatalf("approve after reject: %v, want FailedPrecondition", err)
	}

	h2 := createOn(t, srv, approvals.CreateRequest{Kind: "test_qe", SessionID: "sess-1", Scope: group, Title: "t"})
	if _, err := approve(t, srv, h2.Id, scopedAdmin); err != nil {
		t.Fatal(err)
	}
	exec(t, srv.Pool, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, h2.Id)
	testserver.Eventually(t, 10*time.Second, "partial hold expired", func() bool { return pendingStatus(t, srv, h2.Id) == "expired" })
	if _, err := approve(t, srv, h2.Id, owner); code(err) != codes.FailedPrecondition {
		t.Fatalf("approve after expiry: %v, want FailedPrecondition", err)
	}
}

// Two replicas, three approvers clicking at once on a 2-approval hold:
// exactly one resolution, one grant, one handler run.
func TestQuorumClicksOnTwoReplicasMakeOneGrant(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t, func(c *config.Config) { c.GroupHoldApprovals = 2 })
	b := testserver.StartOn(t, a.URL, func(c *config.Config) { c.GroupHoldApprovals = 2 })
	seed(t, a)
	var mu sync.Mutex
	ran := 0
	for _, srv := range []*testserver.Server{a, b} {
		srv.Deps().Approvals.OnApproved("test_qx", func(context.Context, *guardv1.Hold) error {
			mu.Lock()
			defer mu.Unlock()
			ran++
			return nil
		})
	}
	for round := 0; round < 5; round++ {
		h := createOn(t, a, approvals.CreateRequest{Kind: "test_qx", SessionID: "sess-1", Scope: group, Title: "t"})
		var wg sync.WaitGroup
		for i, u := range []string{scopedAdmin, globalAdmin, owner} {
			srv := []*testserver.Server{a, b}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := approve(t, srv, h.Id, u)
				if err != nil && code(err) != codes.FailedPrecondition {
					t.Errorf("click by %s: %v", u, err)
				}
			}()
		}
		wg.Wait()
		if st := pendingStatus(t, a, h.Id); st != "approved" {
			t.Fatalf("round %d: status %s, want approved", round, st)
		}
		resolved, partial := 0, 0
		for _, e := range eventTypes(t, a, h.Id) {
			switch e {
			case "resolved":
				resolved++
			case "approved_partial":
				partial++
			}
		}
		if resolved != 1 || partial != 1 {
			t.Fatalf("round %d: %d resolved, %d partial events; want 1 and 1", round, resolved, partial)
		}
	}
	testserver.Eventually(t, 10*time.Second, "handlers ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ran == 5
	})
	mu.Lock()
	defer mu.Unlock()
	if ran != 5 {
		t.Fatalf("handlers ran %d times for 5 holds", ran)
	}
}
