package approvals

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/listener"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

func TestHubDropsOnlyTheSlowSubscriber(t *testing.T) {
	t.Parallel()
	h := newHub()
	slow, _ := h.subscribe(1)
	fast, _ := h.subscribe(10)
	evs := []*guardv1.WatchResponse{{Cursor: 1}, {Cursor: 2}, {Cursor: 3}}
	h.broadcast(evs, 3) // never blocks, whatever the subscribers do
	h.broadcast(evs, 3) // replays below the position are ignored
	var got []int64
	for ev := range fast.C {
		got = append(got, ev.Cursor)
		if len(got) == 3 {
			break
		}
	}
	if len(got) != 3 || got[2] != 3 || len(fast.C) != 0 {
		t.Fatalf("fast subscriber got %v (+%d queued)", got, len(fast.C))
	}
	if ev := <-slow.C; ev.Cursor != 1 {
		t.Fatalf("slow subscriber's buffered event: %v", ev)
	}
	if _, ok := <-slow.C; ok || !errors.Is(slow.Err(), ErrSlowSubscriber) {
		t.Fatalf("slow subscriber not dropped: %v", slow.Err())
	}
	slow.close() // idempotent after a drop
	fast.close()
	if len(h.subs) != 0 {
		t.Fatalf("%d subscribers left", len(h.subs))
	}
}

// TestSlowFollowerNeverBlocksHolds: a Watch subscriber that stops reading
// is dropped with ResourceExhausted (naming its cursor) while hold creation
// and a healthy subscriber carry on.
func TestSlowFollowerNeverBlocksHolds(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := New(pool, metrics.NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)), config.Default())
	svc.SubscriberQueue = 2
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- svc.Run(ctx) }()
	// The replica's listener, as app assembles it, wakes the event reader.
	l := listener.New(pool.Config().ConnConfig, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.Handle(EventsChannel, svc.EventWakeups())
	go func() { _ = l.Run(ctx) }()
	if _, err := pool.Exec(ctx, `INSERT INTO users (id) VALUES ('slack:o'); INSERT INTO user_roles (user_id, role) VALUES ('slack:o', 'owner')`); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	slowErr := make(chan error, 1)
	go func() {
		slowErr <- svc.Follow(ctx, 0, false, nil, func(*guardv1.WatchResponse) error { <-release; return nil })
	}()
	var mu sync.Mutex
	var fast []int64
	go func() {
		// A healthy client: when it is dropped anyway (the queue is tiny
		// here), it resumes from its cursor, as Watch clients do.
		var last int64
		for ctx.Err() == nil {
			_ = svc.Follow(ctx, last, false, nil, func(ev *guardv1.WatchResponse) error {
				mu.Lock()
				defer mu.Unlock()
				fast = append(fast, ev.Cursor)
				last = ev.Cursor
				return nil
			})
		}
	}()

	const n = 10
	start := time.Now()
	for i := range n {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := svc.CreateHoldTx(ctx, tx, CreateRequest{Kind: "k", Title: "t", DedupKey: string(rune('a' + i))})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("creating %d holds took %v with a stuck subscriber", n, took)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := len(fast)
		mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthy subscriber got %d of %d events", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	for i, c := range fast {
		if i > 0 && c <= fast[i-1] {
			t.Fatalf("healthy subscriber saw cursor %d after %d", c, fast[i-1])
		}
	}
	mu.Unlock()
	close(release)
	select {
	case err := <-slowErr:
		if !fault.Is(err, fault.Exhausted) {
			t.Fatalf("slow subscriber ended with %v, want an Exhausted fault", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("slow subscriber was never dropped")
	}
	cancel()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
}
