package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batcher carries the hot path's database work (the decision pipeline —
// plan, source, evaluate, record — sends its reads and log rows through it). Whatever queued while the
// previous batch ran goes out as ONE pgx batch on one connection: the
// facts statements of decisions read live and a single multi-row INSERT of
// the log rows of decided ones. Each decision still reads its facts in one
// statement and waits for its log row to commit before it answers (an
// ALLOW's id is citable at once); a busy server pays one round trip per
// burst, not two per decision. Batching is natural (what queued while the
// last batch ran), never timed.
//
// The round trip is made by the caller itself when fewer than slots
// batches are in flight (flat combining): at everyday load a decision
// finds the batcher idle and sends its own batch of one, so no goroutine
// is woken to send it and none to hand the answer back — on a VM each such
// wake-up is a context switch that costs more than the decision. A batch
// that ends with more queued hands the queue to a goroutine that keeps the
// slot, so no caller waits for batches after its own.
type batcher struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	slots int
	yield bool

	mu       sync.Mutex
	queue    []op
	inflight int // batches being sent (≤ slots)
	closed   bool
	drained  *sync.Cond // signalled when inflight drops to 0 after close
	// carry hands a finished batch's slot, with the next batch, to one of
	// slots long-lived goroutines (a fresh goroutine per hand-over would
	// grow a new stack through pgx's deep calls every time). Buffered:
	// there are never more hand-overs pending than slots.
	carry chan []op

	batches, reads, rows atomic.Int64 // for tests and the benchmark
	// observe is told of each batch: its facts reads, log rows and round trip.
	observe func(reads, rows int, took time.Duration)
	// stmts are the log INSERTs, checking rows decided from the snapshot.
	stmts *logStatements
}

type op struct {
	read *readReq
	row  *pendingRow
}

type readReq struct {
	ctx   context.Context
	query string
	args  []any
	dest  []any
	done  chan error
}

const maxBatch = 256

// fullBatch is the queue that opens a second slot beside a batch in flight.
const fullBatch = 64

func newBatcher(pool *pgxpool.Pool, log *slog.Logger, slots int, yield bool) *batcher {
	p := &batcher{pool: pool, log: log, slots: max(slots, 1), yield: yield, stmts: liveStatements}
	p.drained = sync.NewCond(&p.mu)
	p.carry = make(chan []op, p.slots)
	for range p.slots {
		go func() {
			for batch := range p.carry {
				p.drain(batch)
			}
		}()
	}
	return p
}

var errClosed = errors.New("guard engine closed")

// close refuses new work and waits for the batches in flight, and what
// they still had queued, to be sent.
func (p *batcher) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for p.inflight > 0 {
		p.drained.Wait()
	}
	close(p.carry)
}

// submit queues o; if a slot is free the caller sends what is queued now.
// o's done channel is answered in every case (buffered: send never blocks).
func (p *batcher) submit(o op) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errClosed
	}
	p.queue = append(p.queue, o)
	// An idle batcher sends at once. While a batch is in flight, what
	// arrives waits for it to end and goes out as the next batch; another
	// slot is opened only for a queue of fullBatch: a batch of one beside
	// a big one costs Postgres a statement's overhead for one row (half of
	// all statements were such at 14,000 decisions/s).
	if p.inflight >= p.slots || (p.inflight > 0 && len(p.queue) < fullBatch) {
		p.mu.Unlock()
		return nil // a batch in flight takes it when it ends
	}
	p.inflight++
	batch := p.takeLocked()
	p.mu.Unlock()
	p.send(batch)
	if next := p.nextLocked(); next != nil {
		p.carry <- next
	}
	return nil
}

// drain keeps sending batches on a slot until the queue is empty.
func (p *batcher) drain(batch []op) {
	for batch != nil {
		if p.yield && len(batch) < maxBatch {
			// Let decisions that are runnable right now join this batch.
			// (A timer linger would cost a millisecond or more here: VM
			// timer slack; a yield costs microseconds.)
			runtime.Gosched()
			p.mu.Lock()
			batch = append(batch, p.takeUpTo(maxBatch-len(batch))...)
			p.mu.Unlock()
		}
		p.send(batch)
		batch = p.nextLocked()
	}
}

// nextLocked takes the next batch for a slot that just finished one, or
// gives the slot up when nothing is queued.
func (p *batcher) nextLocked() []op {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.inflight--
		if p.inflight == 0 {
			p.drained.Broadcast()
		}
		return nil
	}
	return p.takeLocked()
}

// takeLocked takes up to a batch's worth of the queue (p.mu held).
func (p *batcher) takeLocked() []op { return p.takeUpTo(maxBatch) }

func (p *batcher) takeUpTo(n int) []op {
	if n > len(p.queue) {
		n = len(p.queue)
	}
	batch := p.queue[:n:n]
	if n == len(p.queue) {
		p.queue = nil
	} else {
		p.queue = p.queue[n:]
	}
	return batch
}

// write queues a log row and waits until it is committed (or refused).
func (p *batcher) write(ctx context.Context, r *logRow) error {
	pr := &pendingRow{row: r, done: make(chan error, 1)}
	if err := p.submit(op{row: pr}); err != nil {
		return err
	}
	// Queued: wait for the batch even if the caller gives up, so an answer
	// is never sent for an unlogged decision.
	return <-pr.done
}

// QueryRow satisfies Querier: the row scans once its batch has run.
func (p *batcher) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return &pipedRow{p: p, ctx: ctx, query: query, args: args}
}

type pipedRow struct {
	p     *batcher
	ctx   context.Context
	query string
	args  []any
}

func (r *pipedRow) Scan(dest ...any) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	req := &readReq{ctx: r.ctx, query: r.query, args: r.args, dest: dest, done: make(chan error, 1)}
	if err := r.p.submit(op{read: req}); err != nil {
		return err
	}
	// Always wait: the batch scans into dest and the caller owns it after.
	return <-req.done
}

func (p *batcher) send(batch []op) {
	var reads []*readReq
	var rows []*pendingRow
	for _, o := range batch {
		switch {
		case o.row != nil:
			rows = append(rows, o.row)
		case o.read.ctx.Err() != nil:
			o.read.done <- o.read.ctx.Err()
		default:
			reads = append(reads, o.read)
		}
	}
	if len(reads) == 0 && len(rows) == 0 {
		return
	}
	p.batches.Add(1)
	p.reads.Add(int64(len(reads)))
	p.rows.Add(int64(len(rows)))
	if p.observe != nil {
		start := time.Now()
		defer func() { p.observe(len(reads), len(rows), time.Since(start)) }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(rows) == 0 && len(reads) == 1 {
		r := reads[0]
		r.done <- p.pool.QueryRow(ctx, r.query, r.args...).Scan(r.dest...)
		return
	}
	b := &pgx.Batch{}
	for _, r := range reads {
		b.Queue(r.query, r.args...)
	}
	if len(rows) > 0 {
		sql, args := p.stmts.insert(rows)
		b.Queue(sql, args...)
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		err = fmt.Errorf("acquire connection: %w", err)
		for _, r := range reads {
			r.done <- err
		}
		p.logFailed(rows, err)
		return
	}
	res := conn.SendBatch(ctx, b)
	// A failing statement aborts the rest of its batch (one implicit
	// transaction): the first failure is that decision's own; the reads and
	// log rows after it are retried on their own, so one bad statement
	// never fails other callers' decisions.
	var retry []*readReq
	for _, r := range reads {
		if len(retry) > 0 {
			retry = append(retry, r)
			continue
		}
		if err := res.QueryRow().Scan(r.dest...); err != nil {
			r.done <- err
			retry = append(retry, nil) // marks the batch aborted
			continue
		}
		r.done <- nil
	}
	if len(retry) > 0 {
		_ = res.Close()
		conn.Release()
		for _, r := range retry[1:] {
			r.done <- p.pool.QueryRow(ctx, r.query, r.args...).Scan(r.dest...)
		}
		if len(rows) > 0 {
			sql, args := p.stmts.insert(rows)
			written, err := collectIDs(p.pool.Query(ctx, sql, args...))
			p.settleRows(ctx, rows, written, err)
		}
		return
	}
	defer conn.Release()
	defer res.Close()
	if len(rows) == 0 {
		return
	}
	written, err := collectIDs(res.Query())
	if err == nil {
		// The batch's implicit transaction commits at its end.
		err = res.Close()
	}
	p.settleRows(ctx, rows, written, err)
}

// collectIDs reads the ids the log INSERT returned (rows it wrote).
func collectIDs(ids pgx.Rows, err error) (map[string]bool, error) {
	if err != nil {
		return nil, err
	}
	defer ids.Close()
	written := map[string]bool{}
	for ids.Next() {
		var id string
		if err := ids.Scan(&id); err != nil {
			return nil, err
		}
		written[id] = true
	}
	return written, ids.Err()
}

func (p *batcher) settleRows(ctx context.Context, rows []*pendingRow, written map[string]bool, err error) {
	if err != nil && len(rows) > 1 && refusedByDatabase(err) {
		// The database answered and refused the multi-row INSERT: one row
		// carries a value it cannot store. Written alone, only that row
		// fails; the decisions batched with it are logged and answered on
		// their merits, never turned into "guard failure" denies.
		p.log.Warn("decision log batch refused; writing its rows one by one", "rows", len(rows), "err", err)
		for _, r := range rows {
			one := []*pendingRow{r}
			sql, args := p.stmts.insert(one)
			written, err := collectIDs(p.pool.Query(ctx, sql, args...))
			p.settleRows(ctx, one, written, err)
		}
		return
	}
	if err != nil {
		p.logFailed(rows, err)
		return
	}
	settle(rows, written, nil)
}

// refusedByDatabase: Postgres answered with an error (a value, not the
// connection), so the same rows written apart can succeed.
func refusedByDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

func (p *batcher) logFailed(rows []*pendingRow, err error) {
	if len(rows) == 0 {
		return
	}
	p.log.Error("decision log write failed", "rows", len(rows), "err", err)
	settle(rows, nil, fmt.Errorf("log decision: %w", err))
}
