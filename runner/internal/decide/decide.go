// Package decide is the runner's client of Guard.DecideStream: one stream
// per runner with many decisions in flight, matched by correlation id.
//
// When the stream breaks, every decision still waiting is sent again on the
// next stream (the server answers a repeated request_id with the same
// decision and creates nothing twice). While the server is unreachable a
// caller waits up to its context's deadline and then gets an error: the
// caller fails closed, it never runs the action unchecked.
package decide

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/runner/internal/reconnect"
)

// Client multiplexes decisions over one DecideStream.
type Client struct {
	guard guardv1.GuardClient
	log   *slog.Logger
	// OnConnected is called with true when a stream is up, false when it breaks.
	OnConnected func(up bool)
	// OnReconnect is called each time a stream is re-established.
	OnReconnect func()
	// OnShed is called each time the server sheds a decision (it is asked again).
	OnShed func()
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults 100ms, 5s).
	MinBackoff, MaxBackoff time.Duration

	seq atomic.Uint64

	current reconnect.Current // the stream now open, for Restart
	mu      sync.Mutex
	pending map[string]*call
	stream  grpc.BidiStreamingClient[guardv1.DecideStreamRequest, guardv1.DecideStreamResponse]
	sendMu  sync.Mutex // SendMsg is not safe for concurrent use
}

type call struct {
	frame *guardv1.DecideStreamRequest
	done  chan result
}

type result struct {
	resp *guardv1.DecideResponse
	err  error
}

// New returns a client; call Run to connect.
func New(guard guardv1.GuardClient, log *slog.Logger) *Client {
	if log == nil {
		log = slog.Default()
	}
	return &Client{guard: guard, log: log.With("component", "decide"), pending: map[string]*call{}}
}

// Decide asks the guard and waits for the answer or ctx's end. A decision
// the server shed (ResourceExhausted: it decided nothing) is asked again
// after the server's hint, until ctx ends; the caller then fails closed.
func (c *Client) Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	var waits shedWaits
	for {
		resp, err := c.decideOnce(ctx, req)
		after, shed := shedDelay(err)
		if !shed {
			return resp, err
		}
		if c.OnShed != nil {
			c.OnShed()
		}
		t := time.NewTimer(waits.next(after))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// shedMaxWait caps the doubling of shed waits (a longer hint is still
// waited in full).
const shedMaxWait = 2 * time.Second

// shedWaits spaces the re-asks of one shed decision: the server's latest
// hint (it adapts to the refusal rate), doubled for each refusal in a row
// (capped at shedMaxWait) and jittered by ±25 %, so many shed callers
// spread out instead of coming back together and being shed again.
type shedWaits struct {
	hint     time.Duration
	refusals int
	exp      *backoff.ExponentialBackOff
}

func (w *shedWaits) next(hint time.Duration) time.Duration {
	if hint != w.hint || w.exp == nil {
		// A new hint: start from it, doubled once per refusal so far.
		w.hint = hint
		w.exp = retry.Exponential(hint, max(shedMaxWait, hint))
		for range min(w.refusals, 32) {
			w.exp.NextBackOff()
		}
	}
	w.refusals++
	return w.exp.NextBackOff()
}

// shedDelay reports whether err is the server's admission refusal and how
// long it asks to wait (100ms when it names no delay).
func shedDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || err == nil || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 100 * time.Millisecond, true
}

func (c *Client) decideOnce(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	id := strconv.FormatUint(c.seq.Add(1), 10)
	// The stream is long-lived: each frame carries its own decision's trace
	// context ("" when ctx has none; nothing is traced then).
	cl := &call{frame: &guardv1.DecideStreamRequest{CorrelationId: id, Request: req, Traceparent: telemetry.Traceparent(ctx)},
		done: make(chan result, 1)}
	c.mu.Lock()
	c.pending[id] = cl
	st := c.stream
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if st != nil {
		// A failed send leaves the call pending; the next stream re-sends it.
		_ = c.send(st, cl.frame)
	}
	select {
	case r := <-cl.done:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (c *Client) send(st grpc.BidiStreamingClient[guardv1.DecideStreamRequest, guardv1.DecideStreamResponse], f *guardv1.DecideStreamRequest) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return st.Send(f)
}

// Run keeps a stream up until ctx ends, reconnecting with back-off.
func (c *Client) Run(ctx context.Context) error {
	return reconnect.Loop(ctx, c.log, "decide", c.MinBackoff, c.MaxBackoff, func(n int) (bool, error) {
		return c.once(ctx, n == 0)
	})
}

// once runs one stream; healthy reports whether it ever got an answer.
func (c *Client) once(ctx context.Context, first bool) (healthy bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.current.Set(cancel)
	defer c.current.Clear()
	st, err := c.guard.DecideStream(sctx)
	if err != nil {
		return false, fmt.Errorf("open stream: %w", err)
	}
	c.mu.Lock()
	c.stream = st
	resend := make([]*guardv1.DecideStreamRequest, 0, len(c.pending))
	for _, cl := range c.pending {
		resend = append(resend, cl.frame)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.stream == st {
			c.stream = nil
		}
		c.mu.Unlock()
		if c.OnConnected != nil {
			c.OnConnected(false)
		}
	}()
	if c.OnConnected != nil {
		c.OnConnected(true)
	}
	if !first && c.OnReconnect != nil {
		c.OnReconnect()
	}
	for _, f := range resend {
		if err := c.send(st, f); err != nil {
			break // Recv reports the stream's error
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return healthy, err
		}
		healthy = true
		c.mu.Lock()
		cl := c.pending[resp.GetCorrelationId()]
		c.mu.Unlock()
		if cl == nil {
			continue // answered already (a re-sent duplicate) or the caller gave up
		}
		var r result
		if se := resp.GetError(); se != nil {
			st := status.New(codes.Code(se.GetCode()), se.GetMessage())
			if ra := se.GetRetryAfter(); ra != nil {
				if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: ra}); err == nil {
					st = d
				}
			}
			r.err = st.Err()
		} else if resp.GetResponse() == nil {
			r.err = errors.New("decide stream: frame with neither response nor error")
		} else {
			r.resp = resp.GetResponse()
		}
		select {
		case cl.done <- r:
		default:
		}
	}
}

// RestartIfBefore ends the stream if it was opened before t: the
// connection under it moved to another replica (a GOAWAY, or a replica
// left), so the stream is made again where calls now go.
func (c *Client) RestartIfBefore(t time.Time) bool { return c.current.RestartIfBefore(t) }
