package migrations

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockKey is the advisory lock every replica takes before migrating, so
// several servers starting together apply each migration exactly once.
const lockKey int64 = 0x636c617767756172 // "clawguar"

// ErrDatabaseNewer is returned when the database carries a version this
// binary does not know: an older binary must not run against a newer schema.
var ErrDatabaseNewer = errors.New("database schema is newer than this binary")

// Result reports what Apply did.
type Result struct {
	From, To int
	Applied  []Migration
}

const createVersionTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INT PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// Apply migrates the database up to target (0 = latest), each migration in
// its own transaction, under a session advisory lock held on one connection.
func Apply(ctx context.Context, pool *pgxpool.Pool, target int) (Result, error) {
	all, err := All()
	if err != nil {
		return Result{}, err
	}
	if target == 0 && len(all) > 0 {
		target = all[len(all)-1].Version
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()

	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockKey); err != nil {
		return Result{}, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		// Unlock on a fresh context: the caller's may be cancelled.
		_, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, lockKey)
	}()

	if _, err := conn.Exec(ctx, createVersionTable); err != nil {
		return Result{}, fmt.Errorf("create schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, conn.Conn())
	if err != nil {
		return Result{}, err
	}
	res := Result{From: maxVersion(applied), To: maxVersion(applied)}
	if unknown := unknownVersions(all, applied); len(unknown) > 0 {
		return res, fmt.Errorf("%w: database has migrations %v this binary does not know (it knows up to %d)", ErrDatabaseNewer, unknown, Latest())
	}
	// Set-based, not "everything above the highest": a migration numbered
	// below one already applied (developed in parallel) still gets applied.
	for _, m := range all {
		if applied[m.Version] || m.Version > target {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("apply migration %04d_%s: %w", m.Version, m.Name, err)
		}
		res.Applied = append(res.Applied, m)
		res.To = max(res.To, m.Version)
	}
	return res, nil
}

// Current reports whether the database has exactly the migrations this
// binary knows: every one applied, none unknown. The server serves only then.
func Current(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for schema_migrations: %w", err)
	}
	if !exists {
		return false, nil
	}
	applied, err := appliedVersions(ctx, conn.Conn())
	if err != nil {
		return false, err
	}
	all, err := All()
	if err != nil {
		return false, err
	}
	if len(unknownVersions(all, applied)) > 0 {
		return false, nil
	}
	for _, m := range all {
		if !applied[m.Version] {
			return false, nil
		}
	}
	return true, nil
}

func appliedVersions(ctx context.Context, conn *pgx.Conn) (map[int]bool, error) {
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	out := make(map[int]bool, len(versions))
	for _, v := range versions {
		out[v] = true
	}
	return out, nil
}

func unknownVersions(all []Migration, applied map[int]bool) []int {
	known := make(map[int]bool, len(all))
	for _, m := range all {
		known[m.Version] = true
	}
	var out []int
	for v := range applied {
		if !known[v] {
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out
}

func maxVersion(applied map[int]bool) int {
	m := 0
	for v := range applied {
		m = max(m, v)
	}
	return m
}
