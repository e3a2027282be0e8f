package connect

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
)

// The pushes a stream brings: queued per session in arrival order, applied
// (again, with back-off, while not done yet), remembered, acknowledged.

// queue is one session's pushes in arrival order. Unbounded on purpose: the
// server's push window bounds what is in flight, and a push is never dropped.
type queue struct {
	mu    sync.Mutex
	items []*guardv1.Push
	wake  chan struct{}
}

func (q *queue) put(p *guardv1.Push) {
	q.mu.Lock()
	q.items = append(q.items, p)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) take(ctx context.Context) (*guardv1.Push, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			p := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.mu.Unlock()
			return p, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-q.wake:
		}
	}
}

// dispatch queues a push on its session's worker, unless it is applied
// already (ack again) or queued or being applied (its ack will come). It
// never drops a push.
func (c *Client) dispatch(ctx context.Context, p *guardv1.Push) {
	if c.Applied.Seen(p.GetId()) {
		c.ack(ctx, &guardv1.PushAck{PushId: p.GetId(), Ok: true})
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight[p.GetId()] {
		return
	}
	c.inflight[p.GetId()] = true
	q, ok := c.queues[p.GetSessionId()]
	if !ok {
		q = &queue{wake: make(chan struct{}, 1)}
		c.queues[p.GetSessionId()] = q
		go c.worker(ctx, p.GetSessionId(), q)
	}
	q.put(p)
}

func (c *Client) worker(ctx context.Context, session string, q *queue) {
	for {
		p, ok := q.take(ctx)
		if !ok {
			return
		}
		ack := &guardv1.PushAck{PushId: p.GetId(), Ok: true}
		if err := c.apply(ctx, p); err != nil {
			if ctx.Err() != nil {
				return // shutting down: not acked, the server sends it again
			}
			c.Log.Warn("push not applied", "push", p.GetId(), "session", session, "err", err)
			ack.Ok, ack.Error = false, err.Error()
		} else if err := c.Applied.Mark(p.GetId()); err != nil {
			c.Log.Error("push applied but not recorded", "push", p.GetId(), "err", err)
		} else if c.OnApplied != nil {
			c.OnApplied()
		}
		c.mu.Lock()
		delete(c.inflight, p.GetId())
		c.mu.Unlock()
		c.ack(ctx, ack)
	}
}

// apply applies one push, trying it again with back-off (200 ms doubling to
// 5 s) while Apply answers Retry (the guard or the database is
// unreachable); it gives up once the next try would start past RetryFor.
func (c *Client) apply(ctx context.Context, p *guardv1.Push) error {
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := c.Applier.Apply(ctx, p)
		if err != nil && !IsRetry(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	},
		backoff.WithBackOff(retry.Exponential(200*time.Millisecond, 5*time.Second)),
		backoff.WithMaxElapsedTime(c.RetryFor),
		backoff.WithNotify(func(err error, d time.Duration) {
			c.Log.Warn("push not applied yet; trying again", "push", p.GetId(), "session", p.GetSessionId(), "err", err, "backoff", d)
		}))
	if IsRetry(err) {
		return fmt.Errorf("still not applied after %s: %w", c.RetryFor, err)
	}
	return err
}

// ack queues an ack for the current stream (or the next one), waiting while
// the queue is full; a push is acknowledged only after its effect is durable.
func (c *Client) ack(ctx context.Context, a *guardv1.PushAck) {
	select {
	case c.acks <- a:
	case <-ctx.Done():
	}
}
