package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AsyncWrite runs one statement committed without waiting for the WAL
// flush: the setting and the statement are one batch, one implicit
// transaction, one round trip. It is for writes whose loss in a crash is
// repaired by what follows (a counter, an acknowledgement the runner gives
// again), never for a decision or an approval. dest, when set, scans the
// statement's one row; found is false when it returned none.
func AsyncWrite(ctx context.Context, pool *pgxpool.Pool, sql string, args, dest []any) (found bool, err error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	b.Queue(sql, args...)
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return false, err
	}
	if dest == nil {
		_, err := br.Exec()
		return err == nil, err
	}
	err = br.QueryRow().Scan(dest...)
	if err == pgx.ErrNoRows {
		return false, nil
	}
	return err == nil, err
}
