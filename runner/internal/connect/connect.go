// Package connect keeps the runner's Registry.Connect stream: hello first,
// heartbeats at the server's interval, pushes down. Each push is applied at
// most once by id (the ids are remembered in the data dir), then
// acknowledged; a push the server re-sends after a reconnect is only
// acknowledged again. Pushes of one session apply in order; different
// sessions don't wait for each other (an image rebuild doesn't hold up a
// message to another agent).
package connect

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/reconnect"
)

// Applier applies one push. An error is reported in the ack; the push is
// then not remembered as applied, so a re-send tries again.
type Applier interface {
	Apply(ctx context.Context, p *guardv1.Push) error
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
	MinBackoff    time.Duration // default 100ms
	MaxBackoff    time.Duration // default 5s

	mu       sync.Mutex
	inflight map[string]bool
	queues   map[string]chan *guardv1.Push // per session
	acks     chan *guardv1.PushAck
}

func (c *Client) init() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.acks == nil {
		c.acks = make(chan *guardv1.PushAck, 1024)
		c.inflight = map[string]bool{}
		c.queues = map[string]chan *guardv1.Push{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 5 * time.Second
	}
}

// Run keeps the stream up until ctx ends.
func (c *Client) Run(ctx context.Context) error {
	c.init()
	return reconnect.Loop(ctx, c.Log, "connect", c.MinBackoff, c.MaxBackoff, func(n int) (bool, error) {
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
	// One writer: heartbeats and acks.
	werr := make(chan error, 1)
	go func() {
		t := time.NewTicker(c.Heartbeat)
		defer t.Stop()
		for {
			var f *guardv1.ConnectRequest
			select {
			case <-sctx.Done():
				werr <- sctx.Err()
				return
			case <-t.C:
				f = &guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Heartbeat{Heartbeat: &guardv1.Heartbeat{}}}
			case a := <-c.acks:
				f = &guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Ack{Ack: a}}
			}
			if err := st.Send(f); err != nil {
				werr <- err
				cancel()
				return
			}
		}
	}()
	healthy := false
	for {
		resp, err := st.Recv()
		if err != nil {
			cancel()
			<-werr
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
	}
}

// dispatch queues a push on its session's worker, unless it is applied
// already (ack again) or being applied (its ack will come).
func (c *Client) dispatch(ctx context.Context, p *guardv1.Push) {
	if c.Applied.Seen(p.GetId()) {
		c.ack(&guardv1.PushAck{PushId: p.GetId(), Ok: true})
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
		q = make(chan *guardv1.Push, 256)
		c.queues[p.GetSessionId()] = q
		go c.worker(ctx, p.GetSessionId(), q)
	}
	select {
	case q <- p:
	default:
		// The session's queue is full: drop it un-acked; the server re-sends it.
		delete(c.inflight, p.GetId())
		c.Log.Warn("push queue full; push will be re-sent", "session", p.GetSessionId(), "push", p.GetId())
	}
}

func (c *Client) worker(ctx context.Context, session string, q chan *guardv1.Push) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-q:
			ack := &guardv1.PushAck{PushId: p.GetId(), Ok: true}
			if err := c.Applier.Apply(ctx, p); err != nil {
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
			c.ack(ack)
		}
	}
}

// ack queues an ack for the current stream; if none drains it the server
// re-sends the push and it is acknowledged then.
func (c *Client) ack(a *guardv1.PushAck) {
	select {
	case c.acks <- a:
	default:
	}
}
