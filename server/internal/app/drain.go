package app

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/failover"
)

// keepaliveOptions let clients ping every 5 s or more (the runner and the
// bridges ping after 10 s of silence to find a dead path; gRPC's default
// policy would answer them GOAWAY "too many pings"), ping clients silent
// for 30 s, closing a connection 10 s after an unanswered ping, and send a
// connection older than maxAge GOAWAY: the runners move their streams to a
// new connection, to a random replica (its calls in flight finish first —
// no grace cut-off).
func keepaliveOptions(maxAge time.Duration) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, MaxConnectionAge: maxAge}),
	}
}

// drain ends the replica's long-lived streams when it stops: a runner's
// Connect and DecideStream, a bridge's Watch would otherwise hold
// GracefulStop until its deadline. Each stream ends Unavailable with the
// trailer failover.StoppingKey, which tells the client to reconnect to
// another replica at once; a stream opened once the replica is stopping is
// refused the same way.
type drain struct {
	stopping chan struct{}
	once     sync.Once
}

func newDrain() *drain { return &drain{stopping: make(chan struct{})} }

// stop starts the drain (idempotent).
func (d *drain) stop() { d.once.Do(func() { close(d.stopping) }) }

// errStopping is the status a drained stream ends with.
var errStopping = status.Error(codes.Unavailable, "server replica stopping: reconnect to another replica")

// stream is the outermost stream interceptor: the handler runs on its own
// goroutine, and when the replica stops the stream ends at once; the
// handler's later sends are refused (it sees its receive fail once the
// stream is over, and returns).
func (d *drain) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	stopped := metadata.Pairs(failover.StoppingKey, "1")
	select {
	case <-d.stopping:
		ss.SetTrailer(stopped)
		return errStopping
	default:
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	w := &drainedStream{ServerStream: ss, ctx: ctx}
	done := make(chan error, 1)
	go func() { done <- h(srv, w) }()
	select {
	case err := <-done:
		return err
	case <-d.stopping:
		w.mu.Lock()
		w.over = true
		w.mu.Unlock()
		cancel()
		ss.SetTrailer(stopped)
		return errStopping
	}
}

// drainedStream refuses sends once its stream was ended by the drain.
type drainedStream struct {
	grpc.ServerStream
	ctx  context.Context
	mu   sync.Mutex
	over bool
}

func (w *drainedStream) Context() context.Context { return w.ctx }

func (w *drainedStream) SendMsg(m any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return errStopping
	}
	return w.ServerStream.SendMsg(m)
}

func (w *drainedStream) SetTrailer(md metadata.MD) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.over {
		w.ServerStream.SetTrailer(md)
	}
}
