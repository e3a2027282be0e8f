package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer is a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Exec runs a test's setup SQL (one implicit transaction), failing the test
// on an error. Schema changes on a table the server's own loops write to
// (the partitioned decision log) may be picked by Postgres as a deadlock
// victim; that says nothing about the test, and the rolled-back statement
// is run again, up to five times.
func Exec(tb testing.TB, db Execer, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		_, err := db.Exec(ctx, sql, args...)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" && attempt < 5 {
			continue
		}
		if err != nil {
			tb.Fatalf("setup SQL: %v\n%s", err, sql)
		}
		return
	}
}
