package approvals_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Events in cursor order, exactly once: writers that commit out of order,
// roll back or find their cursor settled never make a reader skip one.

// TestConcurrentWritersNoEventMissed: many transactions creating and
// resolving holds at once; a follower on another replica sees every event
// exactly once, cursors strictly increasing (a smaller cursor committing
// after a larger one was read would be lost without the event lock).
func TestConcurrentWritersNoEventMissed(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	seed(t, a)
	b := testserver.StartOn(t, a.URL)
	w := watch(t, b.Operator(t), &guardv1.WatchRequest{FromNow: true})
	const writers, each = 8, 15
	ownerC := userClients(t, a, owner)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				var res approvals.CreateResult
				err := pgx.BeginFunc(context.Background(), a.Pool, func(tx pgx.Tx) error {
					var err error
					res, err = a.Deps().Approvals.CreateHoldTx(context.Background(), tx, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := ownerC.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: res.Hold.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := w.waitFor(t, 2*writers*each)
	seen := map[string]bool{}
	for i, ev := range evs {
		if i > 0 && ev.GetCursor() <= evs[i-1].GetCursor() {
			t.Fatalf("cursor %d after %d", ev.GetCursor(), evs[i-1].GetCursor())
		}
		k := ev.GetHold().GetId() + ev.GetType().String()
		if seen[k] {
			t.Fatalf("event %s twice", k)
		}
		seen[k] = true
	}
	if len(evs) != 2*writers*each {
		t.Fatalf("%d events, want %d", len(evs), 2*writers*each)
	}
}

// TestAnEarlierCursorStillInFlightIsNotSkipped: writers commit their events
// in parallel, so a hold whose event drew the smaller cursor can commit
// after one with a larger cursor. The readers of both replicas must wait
// for it (a reader that read the larger one alone would advance past the
// smaller for good: an approval lost to every Watch, webhook and bridge).
func TestAnEarlierCursorStillInFlightIsNotSkipped(t *testing.T) {
	t.Parallel()
	a, onA, onB := twoWatchedReplicas(t)
	ctx := context.Background()

	slow, err := a.Pool.Begin(ctx) // draws the smaller cursor, commits last
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	first, err := a.Deps().Approvals.CreateHoldTx(ctx, slow, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	quick := make(chan *guardv1.Hold, 1)
	go func() { // commits at once (a writer never waits for another)
		h, err := createOnErr(a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "quick"})
		if err != nil {
			t.Error(err)
		}
		quick <- h
	}()
	second := <-quick
	if second == nil {
		t.FailNow()
	}
	// Both replicas' readers, woken by the quick one's notification, wait
	// for the slow writer (settling the gap its cursor leaves) instead of
	// reading past its cursor.
	var pid int
	if err := slow.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	waitForWaitersOn(t, a.Pool, pid, 2)
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*watcher{"A": onA, "B": onB} {
		evs := w.waitFor(t, 2)
		if len(evs) != 2 || evs[0].GetHold().GetId() != first.Hold.GetId() || evs[1].GetHold().GetId() != second.GetId() ||
			evs[0].GetCursor() >= evs[1].GetCursor() {
			t.Fatalf("replica %s saw %v, want the slow hold's event then the quick one's", name, evs)
		}
	}
}

// twoWatchedReplicas starts replicas A and B on one seeded database, each
// with an operator's Watch from now; A is returned to write through.
func twoWatchedReplicas(t *testing.T) (*testserver.Server, *watcher, *watcher) {
	t.Helper()
	a := testserver.Start(t)
	seed(t, a)
	b := testserver.StartOn(t, a.URL)
	return a, watch(t, a.Operator(t), &guardv1.WatchRequest{FromNow: true}), watch(t, b.Operator(t), &guardv1.WatchRequest{FromNow: true})
}

// createOnErr is createOn for goroutines: the error instead of t.Fatal.
func createOnErr(srv *testserver.Server, req approvals.CreateRequest) (*guardv1.Hold, error) {
	var res approvals.CreateResult
	err := pgx.BeginFunc(context.Background(), srv.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = srv.Deps().Approvals.CreateHoldTx(context.Background(), tx, req)
		return err
	})
	return res.Hold, err
}

// waitForWaitersOn waits until n sessions wait for a transaction (or a
// subtransaction: the event is inserted under a savepoint) of backend pid.
func waitForWaitersOn(t *testing.T, pool *pgxpool.Pool, pid, n int) {
	t.Helper()
	testserver.Eventually(t, 10*time.Second, fmt.Sprintf("%d readers to wait for backend %d (a reader read past a cursor still in flight?)", n, pid), func() bool {
		var waiting int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks w
			WHERE w.locktype = 'transactionid' AND NOT w.granted AND w.transactionid IN (
				SELECT h.transactionid FROM pg_locks h WHERE h.locktype = 'transactionid' AND h.granted AND h.pid = $1)`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting >= n
	})
}

// TestGapsAreSettledNeverSkipped: a writer that rolls back after drawing a
// cursor leaves a gap; readers tombstone it and deliver what follows. A
// writer that drew a cursor a reader has already settled cannot commit an
// event there: an insert at that cursor fails (insertEvent then retries
// under a fresh one, TestAnEventWhoseCursorWasSettledIsRetried), so no
// event lands behind a reader's back.
func TestGapsAreSettledNeverSkipped(t *testing.T) {
	t.Parallel()
	a, onA, onB := twoWatchedReplicas(t)
	ctx := context.Background()

	// A rolled-back writer's cursor.
	rolled, err := a.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Deps().Approvals.CreateHoldTx(ctx, rolled, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "rolled back"}); err != nil {
		t.Fatal(err)
	}
	if err := rolled.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// A writer caught between drawing its cursor and inserting.
	late, err := a.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	var drawn int64
	if err := late.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('hold_events', 'cursor'))`).Scan(&drawn); err != nil {
		t.Fatal(err)
	}
	after, err := createOnErr(a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "after the gaps"})
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*watcher{"A": onA, "B": onB} {
		evs := w.waitFor(t, 1)
		if len(evs) != 1 || evs[0].GetHold().GetId() != after.GetId() {
			t.Fatalf("replica %s saw %v, want only the event after the gaps", name, evs)
		}
	}
	if _, err := late.Exec(ctx, `INSERT INTO hold_events (cursor, hold_id, type, hold) VALUES ($1, 'h-late', 'requested', '{}')`, drawn); err == nil {
		t.Fatal("an event was inserted at a cursor the readers had passed")
	}
	var tombstones int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM hold_events WHERE type = 'skipped'`).Scan(&tombstones); err != nil || tombstones != 2 {
		t.Fatalf("%d tombstones (%v), want 2: the rolled-back cursor and the late one", tombstones, err)
	}
}

// TestAnEventWhoseCursorWasSettledIsRetried: a writer whose drawn cursor a
// reader settled first (tombstoned) does not fail: its event is inserted
// again, under a fresh cursor, and the rest of its transaction stands.
func TestAnEventWhoseCursorWasSettledIsRetried(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	seed(t, a)
	ctx := context.Background()
	var next int64
	if err := a.Pool.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('hold_events', 'cursor')) + 1`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	// A reader settled the cursor the next writer will draw.
	if _, err := a.Pool.Exec(ctx, `INSERT INTO hold_events (cursor, hold_id, type, hold) VALUES ($1, '', 'skipped', '{}')`, next); err != nil {
		t.Fatal(err)
	}
	h, err := createOnErr(a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "drawn a settled cursor"})
	if err != nil {
		t.Fatalf("a writer whose cursor was settled failed: %v", err)
	}
	var cursor int64
	if err := a.Pool.QueryRow(ctx, `SELECT cursor FROM hold_events WHERE hold_id = $1 AND type = 'requested'`, h.GetId()).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	if cursor <= next {
		t.Fatalf("the event has cursor %d, want one after the settled %d", cursor, next)
	}
}
