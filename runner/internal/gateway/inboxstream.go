package gateway

import (
	"context"
	"slices"
	"time"
)

// The inbox as the agent's stream reads it: one reader at a time, items
// handed out, written, acknowledged, put back; and how stalled the agent is.

// attach makes the caller the only reader: an earlier reader's context is
// cancelled (an agent that reconnects replaces its stale stream), and what
// earlier streams sent and the agent never acknowledged is sent again,
// first. It returns the reader's stream generation.
func (in *Inbox) attach(ctx context.Context) (context.Context, uint64, func()) {
	ctx, cancel := context.WithCancel(ctx)
	in.mu.Lock()
	if in.cancel != nil {
		in.cancel()
	}
	in.gen++
	gen := in.gen
	in.cancel = cancel
	in.progress = time.Now()
	in.requeue(func(s *handed) bool { return true })
	in.mu.Unlock()
	return ctx, gen, func() {
		in.mu.Lock()
		if in.gen == gen {
			in.cancel = nil
		}
		// Its stream is gone: what it sent unacknowledged waits again.
		in.requeue(func(s *handed) bool { return s.gen == gen })
		in.mu.Unlock()
		cancel()
	}
}

// requeue puts the sent, unacknowledged items that match back among the
// waiting ones, in arrival order. Items still being written are left to
// their stream (wrote decides).
func (in *Inbox) requeue(match func(*handed) bool) {
	moved := false
	for id, s := range in.out {
		if !s.sending && match(s) {
			delete(in.out, id)
			in.items = append(in.items, s.entry)
			moved = true
		}
	}
	if moved {
		slices.SortFunc(in.items, func(a, b entry) int { return compare(a.seq, b.seq) })
		in.wake()
	}
}

// Attached reports whether an agent is reading the inbox.
func (in *Inbox) Attached() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cancel != nil
}

// next pops the oldest waiting item for the stream gen, waiting for one
// until ctx ends. The item stays held until taken or put back (sent).
func (in *Inbox) next(ctx context.Context, gen uint64) (entry, error) {
	for {
		in.mu.Lock()
		if len(in.items) > 0 {
			e := in.items[0]
			in.items[0] = entry{}
			in.items = in.items[1:]
			in.out[e.id] = &handed{entry: e, gen: gen, sending: true, since: time.Now()}
			in.mu.Unlock()
			return e, nil
		}
		sig := in.signal
		in.mu.Unlock()
		select {
		case <-sig:
		case <-ctx.Done():
			return entry{}, ctx.Err()
		}
	}
}

// wrote records the outcome of writing e on stream gen: a failed write puts
// it back; a written one is taken, unless the agent acknowledges (acks),
// when it waits for the ack — or, its stream replaced meanwhile, waits to be
// sent again on the new one.
func (in *Inbox) wrote(e entry, gen uint64, err error, acks bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	s, ok := in.out[e.id]
	if !ok || s.gen != gen {
		return // acknowledged meanwhile
	}
	switch {
	case err != nil:
		delete(in.out, e.id)
		in.items = append([]entry{e}, in.items...)
		slices.SortFunc(in.items, func(a, b entry) int { return compare(a.seq, b.seq) })
		in.wake()
	case !acks:
		delete(in.out, e.id)
		in.progress = time.Now()
		in.markTaken(e)
	default:
		s.sending = false
		s.since = time.Now()
		if in.gen != gen || in.cancel == nil {
			in.requeue(func(x *handed) bool { return x == s })
		}
	}
}

// Ack takes the items the agent acknowledges (their ids as sent in
// item_id) and returns how many it held. Unknown ids are ignored: acked
// already, or never sent.
func (in *Inbox) Ack(ids []string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.progress = time.Now()
	n := 0
	for _, id := range ids {
		if s, ok := in.out[id]; ok {
			delete(in.out, id)
			in.markTaken(s.entry)
			n++
			continue
		}
		// Sent on a stream that has ended, and back among the waiting.
		if i := slices.IndexFunc(in.items, func(e entry) bool { return e.id == id }); i >= 0 && in.pending[id] {
			e := in.items[i]
			in.items = slices.Delete(in.items, i, i+1)
			in.markTaken(e)
			n++
		}
	}
	return n
}

// Stalled reports, for the agent-liveness check, how many items the agent
// holds up and since when it showed no progress on them: items sent and
// not acknowledged (or stuck being written), and server-promised items
// waiting with no reader. Zero items: nothing is waiting on the agent.
func (in *Inbox) Stalled() (int, time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var oldest time.Time
	n := 0
	note := func(t time.Time) {
		if n == 0 || t.Before(oldest) {
			oldest = t
		}
		n++
	}
	for _, s := range in.out {
		note(s.since)
	}
	if in.cancel == nil {
		for _, e := range in.items {
			if e.durable {
				note(e.at)
			}
		}
	}
	if n == 0 {
		return 0, time.Time{}
	}
	if in.progress.After(oldest) {
		oldest = in.progress
	}
	return n, oldest
}

// Restarted tells the inbox its agent was (re)started: the stall clock
// starts over.
func (in *Inbox) Restarted() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.progress = time.Now()
}
