// Package store is the server's Postgres access: one pool, one transaction
// helper, and the classification of database errors by what they mean
// (errors.go; the API maps each class to its gRPC code). Queries live
// in the package that owns them, next to the code that uses them.
//
// What it holds: the pgx pool and InTx; Classify (errors.go), every database
// error by what it means — not found, unique, foreign key, check, data,
// integrity, conflict, unavailable (a connection that failed or broke, the
// pool closed, SQLSTATE 08, 53, 57P01–03, 58, 25006 read-only, 40003,
// 57014), canceled, deadline, refused — and Fault/Faulted, which make each
// class a fault where the SQL ran (api.Status maps faults to codes at the
// edge; this package knows no gRPC); ReadReplication (replication.go: what
// the database says about its standbys, one statement); Querier (a pool,
// connection or transaction); NewID (every server-side row id); OpenLogPool
// (the decision log's own small pool, synchronous_commit off only under
// --decision-log-commit=async) and NewOrderedID (decision ids that sort by
// time, so the log's primary key grows at its right edge) with DecisionKey
// (the condition that finds a decision by that key, decisionkey.go) and
// AsyncWrite (a statement committed without waiting for the WAL flush).
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store wraps the pool.
type Store struct {
	Pool *pgxpool.Pool
}

// Open connects and pings; a malformed URL or an unreachable database is an
// error that names the problem without leaking the password.
func Open(ctx context.Context, url string, maxConns int, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("database URL does not parse (check --database-url)")
	}
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s:%d unreachable: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, unwrapConnect(err))
	}
	return &Store{Pool: pool}, nil
}

// Option adjusts the pool's configuration before it opens.
type Option func(*pgxpool.Config)

// WithQueryTracer traces every statement of the pool's connections (the
// server's OpenTelemetry spans, otelpgx; nil: none).
func WithQueryTracer(t pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) {
		if t != nil {
			c.ConnConfig.Tracer = t
		}
	}
}

// Close closes the pool.
func (s *Store) Close() { s.Pool.Close() }

// LogPoolApp is the application_name suffix of the decision log's
// connections, so operators can tell them apart in pg_stat_activity.
const LogPoolApp = "clawguard-decision-log"

// OpenLogPool opens the decision log's own small pool, configured as the
// main one: conns connections, committing with synchronous_commit off when
// async (the commit returns once the WAL record is written, not flushed;
// Postgres flushes it within 3 × wal_writer_delay, and any later
// synchronous commit — a citation applied, a grant consumed — flushes it
// first, since the WAL is flushed in order).
func (s *Store) OpenLogPool(ctx context.Context, conns int, async bool) (*pgxpool.Pool, error) {
	cfg := s.Pool.Config()
	cfg.MaxConns = int32(conns)
	cfg.MinConns = 0
	name := LogPoolApp
	if base := cfg.ConnConfig.RuntimeParams["application_name"]; base != "" {
		name = base + "/" + LogPoolApp
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	if async {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open decision log pool: %w", err)
	}
	return pool, nil
}

// InTx runs fn in a transaction, committing when it returns nil and rolling
// back otherwise.
func (s *Store) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.Pool, fn)
}

// KeyedTx begins a transaction whose statements Postgres plans generically
// from their first execution on a connection (SET LOCAL plan_cache_mode =
// force_generic_plan, sent with BEGIN in its one round trip: the setting
// ends with the transaction). By default every prepared statement is
// planned afresh for its first five executions on each connection, a cost
// the hot approval transactions paid on every new pooled connection for
// plans that end up generic anyway. Only for transactions whose every
// statement finds its rows by key or through indexes whose predicates are
// literals in the statement: a generic plan cannot use a partial index
// whose predicate only a parameter's value would prove.
var KeyedTx = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan"}

// InTx is the same helper for callers holding only a pool.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}

// IsUniqueViolation reports a duplicate key (→ AlreadyExists).
func IsUniqueViolation(err error) bool { return Classify(err) == ClassUnique }

// IsForeignKeyViolation reports a reference to a missing row (→ NotFound or FailedPrecondition).
func IsForeignKeyViolation(err error) bool { return Classify(err) == ClassForeignKey }

// ConstraintName is the violated constraint, for error messages.
func ConstraintName(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

// IsNoRows reports an empty single-row result (→ NotFound).
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// unwrapConnect keeps one line of pgx's connect error (it repeats the
// cause once per address tried).
func unwrapConnect(err error) error {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	return errors.New(strings.TrimSpace(lines[len(lines)-1]))
}

// Querier is what a package's queries need: a pool, a connection or a
// transaction all satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner starts transactions: a pool or a connection.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DB is a Querier that starts transactions too: a pool or a connection.
type DB interface {
	Querier
	TxBeginner
}
