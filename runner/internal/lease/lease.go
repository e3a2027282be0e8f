// Package lease is the runner's own view of its lease, and the fence that
// keeps a session from having two live agents.
//
// The server renews the lease when it receives a renewal (a registration
// or an answered heartbeat), for the lease's TTL from then; after it
// expires the server may give the runner's sessions to another runner. The
// runner cannot see the server's clock, but it knows that every renewal
// that succeeded was received after it was sent: so the lease lasts at
// least until (send time of the last renewal that succeeded) + TTL, on the
// runner's own monotonic clock. A Tracker fences the runner — stops its
// agents and takes no work — a safety margin before that (TTL − TTL/3, as
// leader election renews by a deadline shorter than its lease), with
// SIGKILL by TTL − TTL/6, and lifts the fence at the next renewal.
package lease

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Tracker follows the lease's renewals and fences the runner when they
// stop. Renewed may be called from any goroutine; OnLost and OnRegained run
// on Run's, one at a time.
type Tracker struct {
	// OnLost fences: stop every agent, SIGKILL by killBy, take no work.
	OnLost func(ctx context.Context, killBy time.Time)
	// OnRegained lifts the fence after a renewal; ctx ends when the lease
	// would need fencing again.
	OnRegained func(ctx context.Context)
	Log        *slog.Logger

	// now and after are the clock (tests replace them).
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	mu      sync.Mutex
	sent    time.Time // send time of the last renewal that succeeded
	ttl     time.Duration
	fenced  bool
	changed chan struct{}
}

// New returns a tracker with no renewal yet: it fences nothing until the
// first Renewed.
func New(log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.Default()
	}
	return &Tracker{Log: log, now: time.Now, after: time.After, changed: make(chan struct{}, 1)}
}

// Renewed records a renewal that succeeded: sent is when the runner sent
// it (before the RPC or the heartbeat frame), ttl how long the server
// renews for.
func (t *Tracker) Renewed(sent time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	t.mu.Lock()
	if sent.After(t.sent) {
		t.sent = sent
	}
	t.ttl = ttl
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Margin is how long before the lease can expire the runner fences itself.
func Margin(ttl time.Duration) time.Duration { return ttl / 3 }

// deadlines are when to fence and when every agent must be dead, for the
// last renewal (zero before the first).
func (t *Tracker) deadlines() (fenceAt, killBy time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ttl <= 0 {
		return time.Time{}, time.Time{}, false
	}
	expires := t.sent.Add(t.ttl)
	return expires.Add(-Margin(t.ttl)), expires.Add(-Margin(t.ttl) / 2), true
}

// Fenced reports whether the runner is fenced.
func (t *Tracker) Fenced() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fenced
}

// Run fences the runner whenever its last renewal grows too old and lifts
// the fence on the next one, until ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	for ctx.Err() == nil {
		fenceAt, killBy, ok := t.deadlines()
		now := t.now()
		t.mu.Lock()
		fenced := t.fenced
		t.mu.Unlock()
		switch {
		case ok && !fenced && !now.Before(fenceAt):
			t.mu.Lock()
			t.fenced = true
			last := t.sent
			t.mu.Unlock()
			t.Log.Error("lease not renewed in time: stopping every agent before it can expire (fenced until renewed)",
				"last_renewal_sent", last, "fence_at", fenceAt, "kill_by", killBy)
			if t.OnLost != nil {
				t.OnLost(ctx, killBy)
			}
			continue
		case ok && fenced && now.Before(fenceAt):
			t.mu.Lock()
			t.fenced = false
			t.mu.Unlock()
			t.Log.Warn("lease renewed: agents may run again", "next_fence_at", fenceAt)
			if t.OnRegained != nil {
				rctx, cancel := context.WithDeadline(ctx, fenceAt)
				t.OnRegained(rctx)
				cancel()
			}
			continue
		}
		var timer <-chan time.Time
		if ok && !fenced {
			timer = t.after(fenceAt.Sub(now))
		}
		select {
		case <-ctx.Done():
		case <-t.changed:
		case <-timer:
		}
	}
}
