package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Every way a real Postgres says "not now" is ClassUnavailable: the
// refusals an approver's click met during an outage (57P01 when the server
// shut down under it, 57P03 while it started) and a full disk (53100) were
// answered Internal, which no client retries. What is the request's fault,
// or a bug, stays what it is.
func TestErrorsOfARealPostgresAreClassifiedByWhatTheyMean(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := ctxT(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, ref int REFERENCES t(id), n int CHECK (n > 0))`); err != nil {
		t.Fatal(err)
	}
	// raise makes Postgres itself send the SQLSTATE.
	raise := func(code string) string {
		return fmt.Sprintf(`DO $$ BEGIN RAISE EXCEPTION 'raised %s' USING ERRCODE = '%s'; END $$`, code, code)
	}
	for _, c := range []struct {
		name string
		sql  string
		want store.Class
	}{
		{"no rows", `SELECT 1 WHERE false`, store.ClassNotFound},
		{"unique", `INSERT INTO t (id) VALUES (1), (1)`, store.ClassUnique},
		{"foreign key", `INSERT INTO t (id, ref) VALUES (2, 99)`, store.ClassForeignKey},
		{"check", `INSERT INTO t (id, n) VALUES (3, -1)`, store.ClassCheck},
		{"not null", `INSERT INTO t (id) VALUES (NULL)`, store.ClassCheck},
		{"NUL byte", `SELECT E'a\x00b'::text`, store.ClassData},
		{"bad number", `SELECT 'x'::int`, store.ClassData},
		{"serialization failure", raise("40001"), store.ClassConflict},
		{"deadlock", raise("40P01"), store.ClassConflict},
		{"disk full", raise("53100"), store.ClassUnavailable},
		{"out of memory", raise("53200"), store.ClassUnavailable},
		{"too many connections", raise("53300"), store.ClassUnavailable},
		{"admin shutdown", raise("57P01"), store.ClassUnavailable},
		{"crash shutdown", raise("57P02"), store.ClassUnavailable},
		{"cannot connect now", raise("57P03"), store.ClassUnavailable},
		{"I/O error", raise("58030"), store.ClassUnavailable},
		{"connection failure", raise("08006"), store.ClassUnavailable},
		{"statement timeout", `SET statement_timeout = '10ms'; SELECT pg_sleep(5)`, store.ClassUnavailable},
		{"read-only transaction", `SET default_transaction_read_only = on; INSERT INTO t (id) VALUES (4)`, store.ClassUnavailable},
		{"undefined table: our bug", `SELECT * FROM no_such_table`, store.ClassRefused},
		{"raised by a function", raise("P0001"), store.ClassRefused},
	} {
		var err error
		conn, aerr := pool.Acquire(ctx)
		if aerr != nil {
			t.Fatal(aerr)
		}
		if c.want == store.ClassNotFound {
			var n int
			err = conn.QueryRow(ctx, c.sql).Scan(&n)
		} else {
			stmts := []string{c.sql}
			if strings.HasPrefix(c.sql, "SET ") {
				stmts = strings.Split(c.sql, "; ")
			}
			for _, stmt := range stmts {
				if _, err = conn.Exec(ctx, stmt); err != nil {
					break
				}
			}
		}
		conn.Release()
		// Wrapped with context, as every caller does.
		if got := store.Classify(fmt.Errorf("%s: %w", c.name, err)); got != c.want {
			t.Errorf("%s: %v → %v, want %v", c.name, err, got, c.want)
		}
	}

	// A lock another session holds, with lock_timeout: 55P03.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	if _, err := holder.Exec(ctx, `LOCK TABLE t IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '20ms'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT * FROM t`)
		return err
	})
	if got := store.Classify(err); got != store.ClassConflict {
		t.Errorf("lock timeout: %v → %v, want conflict", err, got)
	}
}

// The connection itself failing: the server refusing it, the backend
// terminated under a statement (what a fast shutdown does to every session),
// the pool closed, a port nobody listens on, and the caller's own context.
func TestAConnectionThatFailsIsUnavailable(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := ctxT(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	admin := pgtest.NewPool(t)

	// Terminated mid-statement: FATAL 57P01 to the victim.
	victim, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := victim.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := victim.Exec(ctx, `SELECT pg_sleep(30)`)
		done <- err
	}()
	waitFor(t, "the victim's statement running", func() bool {
		var n int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid).Scan(&n)
		return n == 1
	})
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if got := store.Classify(err); got != store.ClassUnavailable {
		t.Errorf("terminated backend: %v → %v, want unavailable", err, got)
	}
	// The same connection, used again: pgx closed it.
	_, err = victim.Exec(ctx, `SELECT 1`)
	victim.Release()
	if got := store.Classify(err); got != store.ClassUnavailable {
		t.Errorf("a connection pgx closed: %v → %v, want unavailable", err, got)
	}

	// The database refusing connections (as while it starts or shuts down).
	name := strings.TrimPrefix(pool.Config().ConnConfig.Database, "/")
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	_, err = pgx.Connect(ctx, url)
	if got := store.Classify(err); got != store.ClassUnavailable {
		t.Errorf("connections refused: %v → %v, want unavailable", err, got)
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}

	// Nobody listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	_, err = pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port))
	if got := store.Classify(err); got != store.ClassUnavailable {
		t.Errorf("connection refused: %v → %v, want unavailable", err, got)
	}

	// The pool closed (the replica stopping).
	pool.Close()
	_, err = pool.Exec(ctx, `SELECT 1`)
	if got := store.Classify(err); got != store.ClassUnavailable {
		t.Errorf("closed pool: %v → %v, want unavailable", err, got)
	}

	// The caller gave up: not the database's state.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = admin.Exec(cctx, `SELECT 1`)
	if got := store.Classify(err); got != store.ClassCanceled {
		t.Errorf("cancelled: %v → %v, want canceled", err, got)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = admin.Exec(dctx, `SELECT pg_sleep(5)`)
	if got := store.Classify(err); got != store.ClassDeadline {
		t.Errorf("deadline: %v → %v, want deadline", err, got)
	}
	if got := store.Classify(errors.New("encode result: bad")); got != store.ClassOther {
		t.Errorf("a plain error: %v, want other", got)
	}
}

// A KeyedTx transaction plans generically from its first statement, and
// the setting ends with it: the connection's next transaction is back to
// Postgres' default.
func TestAKeyedTransactionPlansGenericallyAndOnlyItself(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := ctxT(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	mode := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var m string
		if err := q.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var inside string
	if err := pgx.BeginTxFunc(ctx, conn, store.KeyedTx, func(tx pgx.Tx) error {
		inside = mode(tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inside != "force_generic_plan" {
		t.Fatalf("plan_cache_mode in a KeyedTx transaction: %q, want force_generic_plan", inside)
	}
	if after := mode(conn); after != "auto" {
		t.Fatalf("plan_cache_mode after the KeyedTx transaction: %q, want auto", after)
	}
	// A rolled-back one leaves nothing behind either.
	_ = pgx.BeginTxFunc(ctx, conn, store.KeyedTx, func(pgx.Tx) error { return errors.New("roll back") })
	if after := mode(conn); after != "auto" {
		t.Fatalf("plan_cache_mode after a rolled-back KeyedTx transaction: %q, want auto", after)
	}
}
