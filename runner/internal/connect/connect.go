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

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
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

	current  reconnect.Current // the stream now open, for Restart
	mu       sync.Mutex
	inflight map[string]bool
	queues   map[string]*queue // per session
	acks     chan *guardv1.PushAck
	release  chan struct{}
	released chan struct{} // closed once a release frame went out
	ended    chan struct{} // closed once the server ended the released stream
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
	c.current.Set(cancel)
	defer c.current.Clear()
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
			replica := ""
			if p, ok := peer.FromContext(st.Context()); ok && p.Addr != nil {
				replica = p.Addr.String()
			}
			c.Log.Info("connected to the server", "replica", replica)
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
	// A heartbeat at once: its answer says the stream is up (ready) and
	// renews the lease through this replica, before the first tick.
	b.sent(time.Now(), c.Heartbeat)
	if err := send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Heartbeat{Heartbeat: &guardv1.Heartbeat{}}}); err != nil {
		return err
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

// RestartIfBefore ends the stream if it was opened before t: the
// connection under it moved to another replica (a GOAWAY, or a replica
// left), so the stream is made again where calls now go.
func (c *Client) RestartIfBefore(t time.Time) bool { return c.current.RestartIfBefore(t) }
