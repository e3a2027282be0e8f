package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The durable floor (-mode durable): what the machine charges for the least
// answer that waits for a durable write. Each call is the health check of
// -mode health followed by one single-row INSERT committed with
// synchronous_commit on, from this generator straight to the same Postgres:
// a transport round trip, then a commit that waits for the WAL flush, no
// decision logic and no batching. A decision answered only once its log row
// is on disk cannot be faster than this on the same machine at the same rate
// (it also logs a wider row with more indexes).

// durableFloorTable is created in the bench database; its row is about as
// wide as a decision's log row.
const durableFloorTable = `CREATE TABLE IF NOT EXISTS bench_durable_floor (
  id bigint PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  body text NOT NULL
)`

// durableBody is the row's payload (a decision row carries ~300 bytes of
// ids, reason and trace).
var durableBody = strings.Repeat("x", 300)

// durableCall is -mode health's call followed by the durable INSERT.
func durableCall(ctx context.Context, dbURL string, conns []*grpc.ClientConn) (func(ctx context.Context, i int, _ *guardv1.DecideRequest) (*guardv1.DecideResponse, error), func(), error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, nil, fmt.Errorf("durable floor: %w", err)
	}
	// As many connections as the generator has gRPC connections; the commit
	// waits for the flush whatever the server's default is.
	cfg.MaxConns = int32(len(conns))
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("durable floor: %w", err)
	}
	if _, err := pool.Exec(ctx, durableFloorTable); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("durable floor table: %w", err)
	}
	health := unaryCall("health", nil, conns)
	var seq atomic.Int64
	call := func(ctx context.Context, i int, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
		resp, err := health(ctx, i, req)
		if err != nil {
			return nil, err
		}
		if _, err := pool.Exec(ctx, `INSERT INTO bench_durable_floor (id, body) VALUES ($1, $2)`, seq.Add(1), durableBody); err != nil {
			return nil, fmt.Errorf("durable floor insert: %w", err)
		}
		return resp, nil
	}
	return call, pool.Close, nil
}

// isDurableCommitted reports whether the cluster flushes to disk at all
// (fsync on; the floor's own connections set synchronous_commit on). A floor
// measured on a cluster that does not is no floor of a durable answer.
func isDurableCommitted(ctx context.Context, dbURL string) (bool, error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return false, err
	}
	defer pool.Close()
	var fsync string
	if err := pool.QueryRow(ctx, `SHOW fsync`).Scan(&fsync); err != nil {
		return false, fmt.Errorf("read fsync: %w", err)
	}
	return fsync == "on", nil
}
