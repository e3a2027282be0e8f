package registry

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clawguard/clawguard/server/internal/wake"
)

// PushChannel is the NOTIFY channel of runner_pushes (payload: runner id).
const PushChannel = wake.RunnerPushesChannel

// hub fans NOTIFY wake-ups out to this replica's streams. A wake-up only
// says "re-read the table"; the table is the truth.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newHub() *hub { return &hub{subs: map[string]map[chan struct{}]struct{}{}} }

func (h *hub) subscribe(runnerID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[runnerID] == nil {
		h.subs[runnerID] = map[chan struct{}]struct{}{}
	}
	h.subs[runnerID][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[runnerID], ch)
		if len(h.subs[runnerID]) == 0 {
			delete(h.subs, runnerID)
		}
		h.mu.Unlock()
	}
}

func (h *hub) wake(runnerID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[runnerID] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	ids := make([]string, 0, len(h.subs))
	for id := range h.subs {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.wake(id)
	}
}

// PushWakeups is the listener's handler of PushChannel (registered in
// app's buildServices): a NOTIFY wakes the local streams of the runner it
// names, and every (re)connect of the listener wakes every stream, since
// pushes stored while nobody listened are only in the table.
type PushWakeups struct{ hub *hub }

// PushWakeups returns the handler that wakes this replica's runner streams.
func (s *Service) PushWakeups() PushWakeups { return PushWakeups{hub: s.hub} }

// HandleNotification wakes the streams of the runner the payload names.
func (w PushWakeups) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	w.hub.wake(n.Payload)
	return nil
}

// HandleBacklog wakes every stream: they re-read their pending pushes.
func (w PushWakeups) HandleBacklog(context.Context, string, *pgx.Conn) error {
	w.hub.wakeAll()
	return nil
}
