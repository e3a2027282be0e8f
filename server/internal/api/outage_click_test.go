package api_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 29 (5): 9 of 400 approvals clicked during an 8 s Postgres outage
// were answered "Internal: hold: the database refused the operation" — the
// database shutting down under the click's transaction (57P01) — and no
// client retries Internal: the click was lost. It is Unavailable with a
// retry hint, the hold is untouched, and the same click asked again lands
// once.
func TestAClickCutByTheDatabaseShuttingDownIsRetryable(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO users (id) VALUES ('tg:olivia')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('tg:olivia', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	op := srv.Operator(t)
	req, err := op.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "onecli_credential", Card: &guardv1.HoldCard{Title: "a secret"}})
	if err != nil {
		t.Fatal(err)
	}
	id := req.GetHold().GetId()
	click := &guardv1.ResolveRequest{Id: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "tg:olivia"}

	// The click's last write (its resolved event) waits at the cut; the
	// database then kills the session under it, as a fast shutdown does.
	cut := testserver.CutAt(t, srv.Pool, "hold_events", `NEW.type = 'resolved'`)
	answer := make(chan error, 1)
	go func() {
		_, err := op.Approvals.Resolve(ctx, click)
		answer <- err
	}()
	cut.Terminate(15 * time.Second)
	err = <-answer
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || api.RetryDelay(st) <= 0 {
		t.Fatalf("a click cut by a shutdown: %v, want Unavailable with a retry hint", err)
	}
	got, err := op.Approvals.Get(ctx, &guardv1.GetRequest{Id: id})
	if err != nil || got.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("hold after the cut click: %v (%v), want pending", got.GetHold().GetStatus(), err)
	}

	cut.Lift()
	res, err := op.Approvals.Resolve(ctx, click)
	if err != nil || res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED || res.GetHold().GetResolver() != "tg:olivia" {
		t.Fatalf("the same click asked again: %v (%v), want approved by tg:olivia", res.GetHold(), err)
	}
	var resolved int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type = 'resolved'`, id).Scan(&resolved); err != nil || resolved != 1 {
		t.Fatalf("%d resolved events (%v), want 1", resolved, err)
	}
}
