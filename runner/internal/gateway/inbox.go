package gateway

import (
	"context"
	"sync"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// Inbox buffers a session's messages and notices until its agent reads them.
// It outlives the agent's connections (and its container): an item popped
// by a stream that then fails to send is put back, so a reconnecting agent
// sees it. Bounded: when full, the oldest item is dropped.
type Inbox struct {
	mu      sync.Mutex
	items   []*agentv1.InboxResponse
	max     int
	dropped int
	signal  chan struct{} // closed and replaced whenever items arrive
	cancel  context.CancelFunc
	gen     uint64
}

// NewInbox returns an inbox holding at most max items (default 1024).
func NewInbox(max int) *Inbox {
	if max <= 0 {
		max = 1024
	}
	return &Inbox{max: max, signal: make(chan struct{})}
}

// Push appends an item.
func (in *Inbox) Push(item *agentv1.InboxResponse) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.items) >= in.max {
		in.items = in.items[1:]
		in.dropped++
	}
	in.items = append(in.items, item)
	close(in.signal)
	in.signal = make(chan struct{})
}

// Notice and Message are Push for the two item kinds.
func (in *Inbox) Notice(n *agentv1.Notice) {
	in.Push(&agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}})
}
func (in *Inbox) Message(m *agentv1.InboundMessage) {
	in.Push(&agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: m}})
}

// Len is the number of items waiting.
func (in *Inbox) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.items)
}

// Dropped counts items lost to the bound.
func (in *Inbox) Dropped() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.dropped
}

// attach makes the caller the only reader: an earlier reader's context is
// cancelled (an agent that reconnects replaces its stale stream).
func (in *Inbox) attach(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	in.mu.Lock()
	if in.cancel != nil {
		in.cancel()
	}
	in.gen++
	gen := in.gen
	in.cancel = cancel
	in.mu.Unlock()
	return ctx, func() {
		in.mu.Lock()
		if in.gen == gen {
			in.cancel = nil
		}
		in.mu.Unlock()
		cancel()
	}
}

// Attached reports whether an agent is reading the inbox.
func (in *Inbox) Attached() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cancel != nil
}

// next pops the oldest item, waiting for one until ctx ends.
func (in *Inbox) next(ctx context.Context) (*agentv1.InboxResponse, error) {
	for {
		in.mu.Lock()
		if len(in.items) > 0 {
			it := in.items[0]
			in.items[0] = nil
			in.items = in.items[1:]
			in.mu.Unlock()
			return it, nil
		}
		sig := in.signal
		in.mu.Unlock()
		select {
		case <-sig:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// unread puts an item back at the front (its send failed).
func (in *Inbox) unread(it *agentv1.InboxResponse) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.items = append([]*agentv1.InboxResponse{it}, in.items...)
	if len(in.items) > in.max {
		in.items = in.items[:in.max]
		in.dropped++
	}
}
