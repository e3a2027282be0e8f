// Package admission sheds decisions the server cannot answer in time:
// an adaptive concurrency limit (additive increase, multiplicative
// decrease on latency, the AIMD of TCP and of Netflix's concurrency-limits)
// on the decisions in flight. Past the limit a decision is refused at once
// with ResourceExhausted and a retry hint, so the admitted ones keep their
// latency and an overloaded server keeps its goodput instead of queueing
// every caller into timeouts. A refusal decides nothing: the caller (the
// runner) waits and asks again; it never runs the action unchecked.
package admission

import (
	"sync"
	"time"
)

// Options tune a Limiter.
type Options struct {
	// Target is the latency above which the limit shrinks (default 20ms).
	Target time.Duration
	// Min and Max bound the limit (defaults 8 and 4096); Initial is where it
	// starts (default 256).
	Min, Max, Initial int
	// Backoff is the multiplicative decrease (default 0.9), applied at most
	// once per Cooldown (default Target) so one slow burst counts once.
	Backoff  float64
	Cooldown time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Limiter is an adaptive limit on concurrent decisions; safe for
// concurrent use.
type Limiter struct {
	o Options

	mu        sync.Mutex
	limit     float64
	inflight  int
	lastShrnk time.Time
}

// New builds a limiter.
func New(o Options) *Limiter {
	if o.Target <= 0 {
		o.Target = 20 * time.Millisecond
	}
	if o.Min <= 0 {
		o.Min = 8
	}
	if o.Max <= 0 {
		o.Max = 4096
	}
	if o.Max < o.Min {
		o.Max = o.Min
	}
	if o.Initial <= 0 {
		o.Initial = 256
	}
	o.Initial = min(max(o.Initial, o.Min), o.Max)
	if o.Backoff <= 0 || o.Backoff >= 1 {
		o.Backoff = 0.9
	}
	if o.Cooldown <= 0 {
		o.Cooldown = o.Target
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{o: o, limit: float64(o.Initial)}
}

// Acquire admits one decision, or reports false when the limit is reached.
// An admitted decision must call Release with how long it took.
func (l *Limiter) Acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight >= int(l.limit) {
		return false
	}
	l.inflight++
	return true
}

// Release ends an admitted decision: a slow one shrinks the limit (at most
// once per cooldown), a fast one that found the limit nearly used grows it
// by about one per limit's worth of decisions. It returns the limit now.
func (l *Limiter) Release(took time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	busy := l.inflight >= int(l.limit)/2
	l.inflight--
	now := l.o.Now()
	switch {
	case took > l.o.Target:
		if now.Sub(l.lastShrnk) >= l.o.Cooldown {
			l.limit = max(float64(l.o.Min), l.limit*l.o.Backoff)
			l.lastShrnk = now
		}
	case busy:
		l.limit = min(float64(l.o.Max), l.limit+1/l.limit)
	}
	return int(l.limit)
}

// Limit is the current limit and the decisions in flight.
func (l *Limiter) Limit() (limit, inflight int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit), l.inflight
}

// RetryAfter is the hint a refused caller gets: long enough for the
// decisions in flight to drain at the target latency.
func (l *Limiter) RetryAfter() time.Duration {
	return 2 * l.o.Target
}
