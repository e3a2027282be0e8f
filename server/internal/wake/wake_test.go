package wake_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/wake"
	"github.com/clawguard/clawguard/server/internal/wake/waketest"
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
	l := waketest.Listen(ctx, t, pool)

	wctx, woken := wake.With(ctx)
	writeBoth(wctx, t, pool, wake.KeyedTx)
	if got := l.Until(ctx, t, pool); len(got) != 0 {
		t.Fatalf("the commit notified %v; want nothing before Send", got)
	}
	woken.Send(wctx, pool, slog.New(slog.DiscardHandler))
	want := []string{wake.HoldEventsChannel + ":", wake.RunnerPushesChannel + ":r1"}
	if got := l.Until(ctx, t, pool); !slices.Equal(got, want) {
		t.Fatalf("after Send: %v; want %v", got, want)
	}

	writeBoth(ctx, t, pool, store.KeyedTx) // no Set, no setting: the triggers notify
	if got := l.Until(ctx, t, pool); !slices.Equal(got, want) {
		t.Fatalf("without the setting: %v; want the triggers' %v", got, want)
	}
}

// A Set with nothing recorded sends nothing; a runner recorded twice is
// woken once; a push to no runner wakes nobody.
func TestASetWakesEachRunnerOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := waketest.Listen(ctx, t, pool)
	wctx, woken := wake.With(ctx)
	woken.Send(wctx, pool, slog.New(slog.DiscardHandler))
	if got := l.Until(ctx, t, pool); len(got) != 0 {
		t.Fatalf("an empty Set sent %v", got)
	}
	wake.RunnerPushes(wctx, "r2")
	wake.RunnerPushes(wctx, "r2")
	wake.RunnerPushes(wctx, "")
	woken.Send(wctx, pool, slog.New(slog.DiscardHandler))
	if got, want := l.Until(ctx, t, pool), []string{wake.RunnerPushesChannel + ":r2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v; want %v", got, want)
	}
}
