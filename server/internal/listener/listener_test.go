package listener

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/proto/retry"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// recorder is a handler that reports what it was called with.
type recorder struct {
	notes    chan string // "channel:payload"
	backlogs chan string // channel
}

func newRecorder() recorder {
	return recorder{notes: make(chan string, 16), backlogs: make(chan string, 16)}
}

func (r recorder) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	r.notes <- n.Channel + ":" + n.Payload
	return nil
}

func (r recorder) HandleBacklog(_ context.Context, channel string, _ *pgx.Conn) error {
	r.backlogs <- channel
	return nil
}

func recv(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		return ""
	}
}

// waits replaces the back-off sleep: it records each delay and returns at
// once, so the test sees the schedule without waiting it out.
func waits(l *Listener) <-chan time.Duration {
	ch := make(chan time.Duration, 64)
	l.wait = func(ctx context.Context, d time.Duration) error {
		ch <- d
		return ctx.Err()
	}
	return ch
}

// With the database unreachable, reconnects back off 100 ms, doubling up
// to 5 s, and the first connection is tried at once.
func TestReconnectBacksOffExponentially(t *testing.T) {
	conf, err := pgx.ParseConfig("postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	l := New(conf, quiet())
	l.Handle("c", newRecorder())
	got := waits(l)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var seq []time.Duration
	for len(seq) < 8 {
		select {
		case d := <-got:
			seq = append(seq, d)
		case <-time.After(10 * time.Second):
			t.Fatalf("back-off so far %v", seq)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
	for i := range want {
		if !retry.Around(seq[i], want[i]) {
			t.Fatalf("back-off %v, want %v each ±%.0f%%", seq, want, retry.Jitter*100)
		}
	}
	if seq[6] == seq[7] {
		t.Fatalf("back-off %v: two delays at the cap alike (no jitter)", seq)
	}
}

// Notifications reach their channel's handler; a killed connection is
// re-made (the back-off starting over: the connection was healthy), every
// channel's backlog runs again, and notifications flow again.
func TestReconnectsAndRunsEveryBacklogAgain(t *testing.T) {
	url := pgtest.NewEmptyDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l := New(pool.Config().ConnConfig, quiet())
	a, b := newRecorder(), newRecorder()
	l.Handle("chan_a", a)
	l.Handle("chan_b", b)
	got := waits(l)
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()

	recv(t, a.backlogs, "backlog of chan_a")
	recv(t, b.backlogs, "backlog of chan_b")
	if _, err := pool.Exec(ctx, `SELECT pg_notify('chan_a', 'one')`); err != nil {
		t.Fatal(err)
	}
	if n := recv(t, a.notes, "notification"); n != "chan_a:one" {
		t.Fatalf("notification %q", n)
	}

	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, AppName).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("killed %d listener connections (%v), want 1", killed, err)
	}
	select {
	case d := <-got:
		if !retry.Around(d, MinBackoff) {
			t.Fatalf("first reconnect after a healthy connection waits %s, want %s (jittered)", d, MinBackoff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reconnect after the kill")
	}
	recv(t, a.backlogs, "backlog of chan_a after the reconnect")
	recv(t, b.backlogs, "backlog of chan_b after the reconnect")
	if _, err := pool.Exec(ctx, `SELECT pg_notify('chan_b', 'two')`); err != nil {
		t.Fatal(err)
	}
	if n := recv(t, b.notes, "notification after the reconnect"); n != "chan_b:two" {
		t.Fatalf("notification %q", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}
