package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// streamDecider asks for decisions over one Guard.DecideStream, as the
// runner does (runner/internal/decide): each frame carries a correlation
// id and its answer comes back under it; a frame's StreamError comes back
// as a gRPC status error with the frame's code, so a shed replay reads as
// ResourceExhausted. The approval load uses it, so its replays meet
// admission control where the runner's do.
type streamDecider struct {
	stream grpc.BidiStreamingClient[guardv1.DecideStreamRequest, guardv1.DecideStreamResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex
	next   atomic.Int64

	mu      sync.Mutex
	waiting map[string]chan *guardv1.DecideStreamResponse
	done    chan struct{}
	err     error // set before done closes
}

func newStreamDecider(ctx context.Context, cc *grpc.ClientConn) (*streamDecider, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := guardv1.NewGuardClient(cc).DecideStream(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open DecideStream: %w", err)
	}
	d := &streamDecider{stream: stream, cancel: cancel, waiting: map[string]chan *guardv1.DecideStreamResponse{}, done: make(chan struct{})}
	go d.receive()
	return d, nil
}

func (d *streamDecider) receive() {
	defer close(d.done)
	for {
		r, err := d.stream.Recv()
		if err != nil {
			d.err = err
			return
		}
		d.mu.Lock()
		ch := d.waiting[r.GetCorrelationId()]
		delete(d.waiting, r.GetCorrelationId())
		d.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// Decide sends req as one frame and waits for its answer.
func (d *streamDecider) Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	id := strconv.FormatInt(d.next.Add(1), 10)
	ch := make(chan *guardv1.DecideStreamResponse, 1)
	d.mu.Lock()
	d.waiting[id] = ch
	d.mu.Unlock()
	forget := func() {
		d.mu.Lock()
		delete(d.waiting, id)
		d.mu.Unlock()
	}
	d.sendMu.Lock()
	err := d.stream.Send(&guardv1.DecideStreamRequest{CorrelationId: id, Request: req})
	d.sendMu.Unlock()
	if err != nil {
		forget()
		return nil, fmt.Errorf("DecideStream send: %w", err)
	}
	select {
	case r := <-ch:
		if e := r.GetError(); e != nil {
			return nil, status.Error(codes.Code(e.GetCode()), e.GetMessage())
		}
		return r.GetResponse(), nil
	case <-ctx.Done():
		forget()
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-d.done:
		return nil, status.Errorf(codes.Unavailable, "DecideStream ended: %v", d.err)
	}
}

// close ends the stream.
func (d *streamDecider) close() {
	d.sendMu.Lock()
	_ = d.stream.CloseSend()
	d.sendMu.Unlock()
	d.cancel()
}
