package wake_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/wake"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// writeBoth inserts a hold event and a push for runner r1 in one
// transaction begun with opts, recording both in ctx's Set (if any).
func writeBoth(ctx context.Context, t *testing.T, pool *pgxpool.Pool, opts pgx.TxOptions) {
	t.Helper()
	err := pgx.BeginTxFunc(ctx, pool, opts, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO hold_events (hold_id, type, hold) VALUES ($1, 'requested', '{}')`, store.NewID("hold_", 8)); err != nil {
			return err
		}
		wake.HoldEvents(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO runner_pushes (id, runner_id, kind, body) VALUES ($1, 'r1', 'notify', '')`, store.NewID("push_", 8)); err != nil {
			return err
		}
		wake.RunnerPushes(ctx, "r1")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// listen opens a connection listening on both channels and a sentinel.
func listen(ctx context.Context, t *testing.T, pool *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, ch := range []string{wake.HoldEventsChannel, wake.RunnerPushesChannel, "sentinel"} {
		if _, err := conn.Exec(ctx, `LISTEN `+ch); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// received are the notifications up to the sentinel's, as channel:payload.
// Postgres delivers notifications in commit order, so a NOTIFY committed
// before the sentinel arrives before it: what is missing was never sent.
func received(ctx context.Context, t *testing.T, conn *pgx.Conn, pool *pgxpool.Pool) []string {
	t.Helper()
	if _, err := pool.Exec(ctx, `NOTIFY sentinel`); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Channel == "sentinel" {
			return got
		}
		if n.Channel == wake.HoldEventsChannel {
			n.Payload = "" // the cursor: readers do not use it
		}
		got = append(got, n.Channel+":"+n.Payload)
	}
}

// A transaction begun with wake.KeyedTx commits without notifying; Send
// then wakes the hold-event readers and the runner it pushed to, once each.
// Without the setting the triggers notify inside the commit, as before.
func TestATransactionThatWakesAfterCommitNotifiesOnlyThrough(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `INSERT INTO runners (id) VALUES ('r1')`); err != nil {
		t.Fatal(err)
	}
	conn := listen(ctx, t, pool)

	wctx, woken := wake.With(ctx)
	writeBoth(wctx, t, pool, wake.KeyedTx)
	if got := received(ctx, t, conn, pool); len(got) != 0 {
		t.Fatalf("the commit notified %v; want nothing before Send", got)
	}
	woken.Send(wctx, pool, slog.New(slog.DiscardHandler))
	want := []string{wake.HoldEventsChannel + ":", wake.RunnerPushesChannel + ":r1"}
	if got := received(ctx, t, conn, pool); !equal(got, want) {
		t.Fatalf("after Send: %v; want %v", got, want)
	}

	writeBoth(ctx, t, pool, store.KeyedTx) // no Set, no setting: the triggers notify
	if got := received(ctx, t, conn, pool); !equal(got, want) {
		t.Fatalf("without the setting: %v; want the triggers' %v", got, want)
	}
}

// A Set with nothing recorded sends nothing; a runner recorded twice is
// woken once; a push to no runner wakes nobody.
func TestASetWakesEachRunnerOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := listen(ctx, t, pool)
	wctx, woken := wake.With(ctx)
	woken.Send(wctx, pool, slog.New(slog.DiscardHandler))
	if got := received(ctx, t, conn, pool); len(got) != 0 {
		t.Fatalf("an empty Set sent %v", got)
	}
	wake.RunnerPushes(wctx, "r2")
	wake.RunnerPushes(wctx, "r2")
	wake.RunnerPushes(wctx, "")
	woken.Send(wctx, pool, slog.New(slog.DiscardHandler))
	if got, want := received(ctx, t, conn, pool), []string{wake.RunnerPushesChannel + ":r2"}; !equal(got, want) {
		t.Fatalf("got %v; want %v", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
