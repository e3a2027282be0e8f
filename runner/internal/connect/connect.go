// Package connect keeps the runner's Registry.Connect stream: hello first,
// heartbeats at the server's interval, pushes down. Each push is applied at
// most once by id (the ids are remembered in the data dir), then
// acknowledged — only once its effect is durable; a push the server re-sends
// (after a reconnect, or unacknowledged past its deadline) is only
// acknowledged again. Pushes of one session apply in order from an unbounded
// queue (the server's push window bounds it; nothing is dropped); different
// sessions don't wait for each other. A push that is not done yet (the guard
// could not decide) is tried again here, never acknowledged as done. A clean
// stop releases the lease on the stream. Each answered heartbeat is reported
// with its send time (OnRenewed: the runner fences itself by it), and a
// stream on which heartbeats go unanswered for two intervals is given up and
// made again.
package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/grpc"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
	"github.com/clawguard/clawguard/runner/internal/reconnect"
)

// Applier applies one push. An error is reported in the ack; the push is
// then not remembered as applied, so a re-send tries again. An error marked
// Retry is not reported at all: the push is tried again here, with back-off,
// and acknowledged only once it is applied (or RetryFor has passed).
type Applier interface {
	Apply(ctx context.Context, p *guardv1.Push) error
}

// retryable marks an Apply error as "not done yet, try again".
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// Retry marks err as retryable: nothing was decided or made durable, so the
// push is applied again later instead of being acknowledged as failed.
func Retry(err error) error {
	if err == nil {
		return nil
	}
	return retryable{err}
}

// IsRetry reports whether err was marked with Retry.
func IsRetry(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// Client is the runner's Connect stream.
type Client struct {
	Registry guardv1.RegistryClient
	RunnerID string
	// InstanceID is the one the runner registered with (its lease).
	InstanceID string
	Applied    *Applied
	Applier    Applier
	Heartbeat  time.Duration // from RegisterRunnerResponse; default 5s
	Log        *slog.Logger
	// BeforeConnect runs before each (re)connect, e.g. to re-register.
	BeforeConnect func(ctx context.Context) error
	OnConnected   func(up bool)
	OnReconnect   func()
	OnApplied     func()
	// OnRenewed is told of each heartbeat the server answered: when it was
	// sent and how long the renewed lease lasts (the answer's, else three
	// heartbeat intervals, the server's default).
	OnRenewed  func(sent time.Time, ttl time.Duration)
	MinBackoff time.Duration // default 100ms
	MaxBackoff time.Duration // default 5s
	// RetryFor bounds how long a push whose Apply keeps answering Retry is
	// tried before it is acknowledged as failed (default 10m).
	RetryFor time.Duration

	mu       sync.Mutex
	inflight map[string]bool
	queues   map[string]*queue // per session
	acks     chan *guardv1.PushAck
	release  chan struct{}
	released chan struct{} // closed once a release frame went out
	ended    chan struct{} // closed once the server ended the released stream
}

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

func (c *Client) init() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.acks == nil {
		c.acks = make(chan *guardv1.PushAck, 1024)
		c.inflight = map[string]bool{}
		c.queues = map[string]*queue{}
		c.release = make(chan struct{})
		c.released = make(chan struct{})
		c.ended = make(chan struct{})
	}
	if c.RetryFor <= 0 {
		c.RetryFor = 10 * time.Minute
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 5 * time.Second
	}
}

// Run keeps the stream up until ctx ends or the lease is released.
func (c *Client) Run(ctx context.Context) error {
	c.init()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.released:
			// The server ends the stream after a release; don't reconnect.
			<-time.After(releaseWait)
			cancel()
		case <-ctx.Done():
		}
	}()
	return reconnect.Loop(ctx, c.Log, "connect", c.MinBackoff, c.MaxBackoff, func(n int) (bool, error) {
		if c.isReleased() {
			cancel()
			return true, nil
		}
		if n > 0 && c.OnReconnect != nil {
			c.OnReconnect()
		}
		healthy, err := c.once(ctx)
		if c.OnConnected != nil {
			c.OnConnected(false)
		}
		return healthy, err
	})
}

// releaseWait is how long Run waits for the server to end a released stream.
const releaseWait = 5 * time.Second

func (c *Client) isReleased() bool {
	select {
	case <-c.released:
		return true
	default:
		return false
	}
}

// Release gives the runner's lease up on the current stream (a clean stop),
// so the same runner id can register again at once. It waits until the frame
// is sent or ctx ends; without a stream the lease simply expires.
func (c *Client) Release(ctx context.Context) error {
	c.init()
	select {
	case c.release <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("release lease: no stream to send it on: %w", ctx.Err())
	}
	// The server ends the stream once the release is recorded.
	select {
	case <-c.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("release lease: no answer from the server: %w", ctx.Err())
	}
}

func (c *Client) once(ctx context.Context) (bool, error) {
	if c.BeforeConnect != nil {
		if err := c.BeforeConnect(ctx); err != nil {
			return false, err
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Registry.Connect(sctx)
	if err != nil {
		return false, fmt.Errorf("open connect stream: %w", err)
	}
	if err := st.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Hello{Hello: &guardv1.ConnectHello{RunnerId: c.RunnerID, InstanceId: c.InstanceID}}}); err != nil {
		return false, fmt.Errorf("hello: %w", err)
	}
	b := &beats{}
	werr := make(chan error, 1)
	go func() { werr <- c.write(sctx, cancel, st, b) }()
	healthy := false
	for {
		resp, err := st.Recv()
		if err != nil {
			cancel()
			var stalled stalledError
			if errors.As(<-werr, &stalled) {
				err = stalled
			}
			if errors.Is(err, io.EOF) && c.isReleased() {
				close(c.ended)
			}
			return healthy, err
		}
		if !healthy {
			healthy = true
			if c.OnConnected != nil {
				c.OnConnected(true)
			}
		}
		if p := resp.GetPush(); p != nil {
			c.dispatch(ctx, p)
		}
		if l := resp.GetLease(); l != nil {
			if sent := b.answered(); !sent.IsZero() && c.OnRenewed != nil {
				c.OnRenewed(sent, c.leaseTTL(l))
			}
		}
	}
}

// beats are the send times of the heartbeats not yet answered, oldest
// first: the server answers them in order.
type beats struct {
	mu    sync.Mutex
	times []time.Time
}

// sent records a heartbeat sent now; stalled says the oldest unanswered one
// is older than two intervals (since then).
func (b *beats) sent(now time.Time, interval time.Duration) (stalled bool, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.times) > 0 && now.Sub(b.times[0]) > 2*interval {
		return true, b.times[0]
	}
	b.times = append(b.times, time.Now())
	return false, time.Time{}
}

// answered takes the oldest heartbeat's send time (zero when none waits).
func (b *beats) answered() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.times) == 0 {
		return time.Time{}
	}
	t := b.times[0]
	b.times = b.times[1:]
	return t
}

// write is the stream's one writer: heartbeats and acks, and the lease's
// release on a clean stop. A heartbeat that finds the one before
// unanswered for two intervals gives the stream up: the server (or the
// path to it) is gone without the stream noticing, so a new one is made,
// elsewhere if it can.
func (c *Client) write(ctx context.Context, cancel func(), st grpc.BidiStreamingClient[guardv1.ConnectRequest, guardv1.ConnectResponse], b *beats) error {
	t := time.NewTicker(c.Heartbeat)
	defer t.Stop()
	send := func(f *guardv1.ConnectRequest) error {
		if err := st.Send(f); err != nil {
			cancel()
			return err
		}
		return nil
	}
	for {
		var f *guardv1.ConnectRequest
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			if stalled, since := b.sent(now, c.Heartbeat); stalled {
				cancel()
				return stalledError{time.Since(since)}
			}
			f = &guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Heartbeat{Heartbeat: &guardv1.Heartbeat{}}}
		case a := <-c.acks:
			f = &guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Ack{Ack: a}}
		case <-c.release:
			// Acks already queued go first: their pushes are done.
			for drained := false; !drained; {
				select {
				case a := <-c.acks:
					if err := send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Ack{Ack: a}}); err != nil {
						return err
					}
				default:
					drained = true
				}
			}
			if err := send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Release{Release: &guardv1.LeaseRelease{}}}); err != nil {
				return err
			}
			close(c.released)
			return nil
		}
		if err := send(f); err != nil {
			return err
		}
	}
}

// stalledError ends a stream whose heartbeats go unanswered.
type stalledError struct{ since time.Duration }

func (e stalledError) Error() string {
	return fmt.Sprintf("no answer to a heartbeat sent %s ago; giving the stream up", e.since.Round(time.Millisecond))
}

// leaseTTL is how long a renewal lasts: the server's word, else three
// heartbeat intervals (the server's default relation).
func (c *Client) leaseTTL(l *guardv1.LeaseRenewed) time.Duration {
	if d := l.GetTtl().AsDuration(); d > 0 {
		return d
	}
	return 3 * c.Heartbeat
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
