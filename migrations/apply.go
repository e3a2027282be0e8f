package migrations

import (
	"context"
	"errors"
	"fmt"

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
	current, err := currentVersion(ctx, conn.Conn())
	if err != nil {
		return Result{}, err
	}
	res := Result{From: current, To: current}
	if latest := Latest(); current > latest {
		return res, fmt.Errorf("%w: database at version %d, binary knows up to %d", ErrDatabaseNewer, current, latest)
	}
	for _, m := range all {
		if m.Version <= current || m.Version > target {
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
		res.To = m.Version
	}
	return res, nil
}

// Version reports the database's schema version (0 when never migrated).
func Version(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("look for schema_migrations: %w", err)
	}
	if !exists {
		return 0, nil
	}
	return currentVersion(ctx, conn.Conn())
}

func currentVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
