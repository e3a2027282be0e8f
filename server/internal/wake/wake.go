// Package wake sends, after a transaction commits, the notifications its
// triggers left out. A NOTIFY inside a transaction takes pg_database's lock
// at commit and holds it through the commit's WAL flush, so every durable
// transaction that notifies queues behind every other one, cluster-wide.
// The hot approval transactions (a hold's creation, a click) begin with
// KeyedTx, which tells the triggers of hold_events and runner_pushes not to
// notify (migration 0450); what they wrote says, through the context's
// Set, whom to wake; Send wakes them once the commit returned, in one
// statement that writes nothing and so waits for no flush.
//
// A notification is only a wake-up (the tables are the truth, and every
// reader also polls), so one lost with a failed Send costs latency, never a
// push or an event.
package wake

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/server/internal/store"
)

// The NOTIFY channels the triggers signal (their payloads: a hold event's
// cursor, which readers do not use; a push's runner id).
const (
	HoldEventsChannel   = "clawguard_hold_events"
	RunnerPushesChannel = "clawguard_runner_pushes"
)

// KeyedTx is store.KeyedTx for a transaction that wakes its listeners
// itself after commit: the setting goes with BEGIN, in its round trip, and
// ends with the transaction.
var KeyedTx = pgx.TxOptions{BeginQuery: store.KeyedTx.BeginQuery + "; SET LOCAL clawguard.wake = 'after_commit'"}

// Set is whom a transaction's writes must wake. Safe for concurrent use.
type Set struct {
	mu      sync.Mutex
	events  bool
	runners []string
}

type setKey struct{}

// With returns ctx carrying a new Set, and the Set.
func With(ctx context.Context) (context.Context, *Set) {
	s := &Set{}
	return context.WithValue(ctx, setKey{}, s), s
}

// HoldEvents records that a hold event was written under ctx's Set, if it
// has one (a transaction without one lets the trigger notify).
func HoldEvents(ctx context.Context) {
	if s, ok := ctx.Value(setKey{}).(*Set); ok {
		s.mu.Lock()
		s.events = true
		s.mu.Unlock()
	}
}

// RunnerPushes records that a push for runnerID was written under ctx's
// Set, if it has one. "" (a session no runner hosts) wakes nobody.
func RunnerPushes(ctx context.Context, runnerID string) {
	s, ok := ctx.Value(setKey{}).(*Set)
	if !ok || runnerID == "" {
		return
	}
	s.mu.Lock()
	if !slices.Contains(s.runners, runnerID) {
		s.runners = append(s.runners, runnerID)
	}
	s.mu.Unlock()
}

// sendTimeout bounds Send: the caller's answer waits for it.
const sendTimeout = 2 * time.Second

// Send notifies what s recorded, after the commit: one statement, outside
// any transaction that wrote. It runs even when ctx was cancelled after the
// commit (the wake-up is owed to the others), and a failure is logged.
func (s *Set) Send(ctx context.Context, q store.Querier, log *slog.Logger) {
	s.mu.Lock()
	channels, payloads := s.notifications()
	s.mu.Unlock()
	if len(channels) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	if _, err := q.Exec(ctx, `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS n(c, p)`, channels, payloads); err != nil {
		log.Warn("waking listeners after commit failed; they catch up on their next poll", "err", err)
	}
}

// notifications are s's NOTIFYs as channel and payload columns.
func (s *Set) notifications() (channels, payloads []string) {
	if s.events {
		channels, payloads = append(channels, HoldEventsChannel), append(payloads, "")
	}
	for _, r := range s.runners {
		channels, payloads = append(channels, RunnerPushesChannel), append(payloads, r)
	}
	return channels, payloads
}
