package approvals

import (
	"errors"
	"sync"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ErrSlowSubscriber ends a subscription whose buffer filled up: it resumes
// from its last cursor instead of holding everyone else back.
var ErrSlowSubscriber = errors.New("subscriber too slow; resume from the last cursor")

// hub fans the events one replica reads out to its subscribers. Each
// subscriber has its own buffer; a full buffer drops that subscriber only.
type hub struct {
	mu   sync.Mutex
	last int64 // highest cursor broadcast
	subs map[*subscription]struct{}
	wake chan struct{}
}

type subscription struct {
	h      *hub
	C      chan *guardv1.WatchResponse
	err    error // set before C is closed
	closed bool
}

func newHub() *hub {
	return &hub{subs: map[*subscription]struct{}{}, wake: make(chan struct{}, 1)}
}

// subscribe registers a subscriber; every event with a cursor above the
// returned position will be sent to it (or it is dropped).
func (h *hub) subscribe(buf int) (*subscription, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &subscription{h: h, C: make(chan *guardv1.WatchResponse, buf)}
	h.subs[s] = struct{}{}
	return s, h.last
}

// close unregisters the subscriber (idempotent).
func (s *subscription) close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.closeLocked(nil)
}

func (s *subscription) closeLocked(err error) {
	if s.closed {
		return
	}
	s.closed = true
	s.err = err
	delete(s.h.subs, s)
	close(s.C)
}

// Err is why the subscription ended (after C is closed).
func (s *subscription) Err() error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.err
}

// broadcast sends events (ascending cursors above h.last) to every
// subscriber without blocking, and moves the position to through (the
// read's end: tombstones after the last event are passed too).
func (h *hub) broadcast(evs []*guardv1.WatchResponse, through int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { h.last = max(h.last, through) }()
	for _, ev := range evs {
		if ev.Cursor <= h.last {
			continue
		}
		h.last = ev.Cursor
		for s := range h.subs {
			select {
			case s.C <- ev:
			default:
				s.closeLocked(ErrSlowSubscriber)
			}
		}
	}
}

func (h *hub) position() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}
