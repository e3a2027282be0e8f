package testserver

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations/pgtest"
)

var cutLocks atomic.Int64

// Cut is a fault placed in one statement: every INSERT into its table
// (matching when, a SQL condition on NEW) waits, inside its transaction,
// until Terminate kills the waiting backend — what `pg_ctl stop -m fast`
// does to every session: the client gets FATAL 57P01 mid-transaction and
// the transaction rolls back. Lift removes it.
type Cut struct {
	t     testing.TB
	pool  *pgxpool.Pool
	lock  int64
	name  string
	table string
	held  *pgxpool.Conn
}

// CutAt installs a Cut on table; when is a condition on NEW ("true" for
// every row). pool must be a superuser's (the test's).
func CutAt(t testing.TB, pool *pgxpool.Pool, table, when string) *Cut {
	t.Helper()
	c := &Cut{t: t, pool: pool, lock: 880000 + cutLocks.Add(1), table: table}
	c.name = fmt.Sprintf("fault_cut_%d", c.lock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, `SELECT pg_advisory_lock($1)`, c.lock); err != nil {
		t.Fatal(err)
	}
	c.held = held
	pgtest.Exec(t, pool, fmt.Sprintf(`
		CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF %[3]s THEN PERFORM pg_advisory_xact_lock_shared(%[2]d); END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER %[1]s BEFORE INSERT ON %[4]s FOR EACH ROW EXECUTE FUNCTION %[1]s()`, c.name, c.lock, when, table))
	t.Cleanup(c.Lift)
	return c
}

// Terminate waits until a backend is held at the cut and terminates it; it
// returns once the backend is gone.
func (c *Cut) Terminate(timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	var pid int
	Eventually(c.t, timeout, "a backend held at the cut on "+c.table, func() bool {
		err := c.pool.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = 0 AND objid = $1 LIMIT 1`, c.lock).Scan(&pid)
		return err == nil
	})
	if _, err := c.pool.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid); err != nil {
		c.t.Fatal(err)
	}
}

// Lift removes the cut (idempotent).
func (c *Cut) Lift() {
	if c.held == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pgtest.Exec(c.t, c.pool, fmt.Sprintf(`DROP TRIGGER IF EXISTS %[1]s ON %[2]s; DROP FUNCTION IF EXISTS %[1]s()`, c.name, c.table))
	_, _ = c.held.Exec(ctx, `SELECT pg_advisory_unlock($1)`, c.lock)
	c.held.Release()
	c.held = nil
}
