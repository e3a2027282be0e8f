// Package waketest listens on the wake-up channels for tests, and tells
// what was notified up to a point.
package waketest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/server/internal/wake"
)

// Listener is a connection listening on both wake-up channels and a
// sentinel of its own.
type Listener struct{ conn *pgx.Conn }

// Listen opens a Listener on pool's database, closed with the test.
func Listen(ctx context.Context, t *testing.T, pool *pgxpool.Pool) *Listener {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, ch := range []string{wake.HoldEventsChannel, wake.RunnerPushesChannel, "waketest_sentinel"} {
		if _, err := conn.Exec(ctx, `LISTEN `+ch); err != nil {
			t.Fatal(err)
		}
	}
	return &Listener{conn: conn}
}

// Until notifies the sentinel through pool and returns what arrived before
// it, in order, as channel:payload (a hold event's payload, its cursor,
// left out: readers do not use it). Postgres delivers notifications in
// commit order, so one committed before the sentinel arrives before it:
// what is missing was never sent.
func (l *Listener) Until(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	if _, err := pool.Exec(ctx, `NOTIFY waketest_sentinel`); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Channel == "waketest_sentinel" {
			return got
		}
		if n.Channel == wake.HoldEventsChannel {
			n.Payload = ""
		}
		got = append(got, n.Channel+":"+n.Payload)
	}
}
