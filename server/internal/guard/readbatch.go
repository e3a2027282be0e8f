package guard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readBatcher pipelines concurrent decisions' facts statements: whatever
// queued while the previous batch ran is sent as one pgx batch on one
// connection — one network round trip and one backend wake-up for many
// decisions, instead of one each. Each decision still reads its facts in
// a single statement; an idle server sends batches of one.
type readBatcher struct {
	pool *pgxpool.Pool
	ch   chan *readReq
	wg   sync.WaitGroup
	once sync.Once
}

type readReq struct {
	ctx   context.Context
	query string
	args  []any
	dest  []any
	done  chan error
}

const maxReadBatch = 128

func newReadBatcher(pool *pgxpool.Pool, workers int) *readBatcher {
	b := &readBatcher{pool: pool, ch: make(chan *readReq, 4*maxReadBatch)}
	for range workers {
		b.wg.Add(1)
		go b.run()
	}
	return b
}

func (b *readBatcher) close() {
	b.once.Do(func() { close(b.ch) })
	b.wg.Wait()
}

// QueryRow satisfies querier; the row scans once its batch has run.
func (b *readBatcher) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return &batchedRow{b: b, ctx: ctx, query: query, args: args}
}

type batchedRow struct {
	b     *readBatcher
	ctx   context.Context
	query string
	args  []any
}

func (r *batchedRow) Scan(dest ...any) error {
	req := &readReq{ctx: r.ctx, query: r.query, args: r.args, dest: dest, done: make(chan error, 1)}
	select {
	case r.b.ch <- req:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-r.ctx.Done():
		// The batch may still scan into dest; the caller is gone and
		// never reads it.
		return r.ctx.Err()
	}
}

func (b *readBatcher) run() {
	defer b.wg.Done()
	batch := make([]*readReq, 0, maxReadBatch)
	for first := range b.ch {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxReadBatch {
			select {
			case q, ok := <-b.ch:
				if !ok {
					break drain
				}
				batch = append(batch, q)
			default:
				break drain
			}
		}
		b.send(batch)
	}
}

func (b *readBatcher) send(batch []*readReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.done <- r.ctx.Err()
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(live) == 1 {
		r := live[0]
		r.done <- b.pool.QueryRow(ctx, r.query, r.args...).Scan(r.dest...)
		return
	}
	pb := &pgx.Batch{}
	for _, r := range live {
		pb.Queue(r.query, r.args...)
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		for _, r := range live {
			r.done <- fmt.Errorf("acquire connection: %w", err)
		}
		return
	}
	defer conn.Release()
	res := conn.SendBatch(ctx, pb)
	for _, r := range live {
		r.done <- res.QueryRow().Scan(r.dest...)
	}
	if err := res.Close(); err != nil {
		// Already reported per row; a broken connection is dropped by the pool.
		_ = err
	}
}
