package mcpface

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/retry"
)

// maxAckBatch is the most ids one Ack call carries (the gateway's bound).
const maxAckBatch = 1024

// acks sends the runner the ids of items now in the queue, batched (what
// piles up while one Ack is in flight goes in the next, up to
// maxAckBatch), and retried with jittered back-off until they are taken.
// An ack that never arrives costs nothing but a re-send: the runner sends
// the item again on the next stream and the queue recognises it.
type acks struct {
	to  Acker
	log *slog.Logger

	mu      sync.Mutex
	ids     []string        // to send, in order
	pending map[string]bool // the same, for de-duplication
	wake    chan struct{}   // a signal that ids were added (buffered: one)
}

func newAcks(to Acker, log *slog.Logger) *acks {
	return &acks{to: to, log: log, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// add queues an id to acknowledge.
func (a *acks) add(id string) {
	a.mu.Lock()
	if !a.pending[id] {
		a.pending[id] = true
		a.ids = append(a.ids, id)
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// batch is the next ids to send (not removed until sent).
func (a *acks) batch() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids[:min(len(a.ids), maxAckBatch)]...)
}

// sent removes the first n ids (a batch the runner took).
func (a *acks) sent(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range a.ids[:n] {
		delete(a.pending, id)
	}
	a.ids = append([]string(nil), a.ids[n:]...)
}

// run sends the acks until ctx ends.
func (a *acks) run(ctx context.Context) {
	delays := retry.Exponential(100*time.Millisecond, 5*time.Second)
	for {
		b := a.batch()
		if len(b) == 0 {
			select {
			case <-a.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := a.to.Ack(actx, b)
		cancel()
		switch {
		case err == nil:
			a.sent(len(b))
			delays.Reset()
			continue
		case ctx.Err() != nil:
			return
		case status.Code(err) == codes.InvalidArgument:
			// Refused as such: sending it again cannot help. The runner
			// keeps the items and sends them again; they are recognised.
			a.log.Warn("clawguard-mcp: the runner refused an ack", "ids", len(b), "err", err)
			a.sent(len(b))
			continue
		}
		d := delays.NextBackOff()
		a.log.Debug("clawguard-mcp: ack failed; trying again", "ids", len(b), "err", err, "in", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}
