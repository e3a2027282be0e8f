// Package admission sheds decisions the server cannot answer in time:
// an adaptive concurrency limit on the decisions in flight, adjusted once
// per window from the window's mean latency (additive increase while it
// meets the target, a decrease proportional to the overshoot when it does
// not: the gradient limiters of Netflix's concurrency-limits, not the
// per-sample AIMD of TCP, whose every slow outlier shrank the limit and
// collapsed it to its floor under a closed loop). Past the limit a decision
// is refused at once with ResourceExhausted and a retry hint, so the
// admitted ones keep their latency and an overloaded server keeps its
// goodput instead of queueing every caller into timeouts. A refusal decides
// nothing: the caller (the runner) waits and asks again; it never runs the
// action unchecked.
//
// The retry hint adapts too. Refusals are not free (each is a gRPC round
// trip with authentication), and a fixed hint lets many waiting callers
// come back faster than the server admits them: their refusals then take
// the CPU the decisions need. The hint grows while a window refuses more
// than a fifth of what it admits and shrinks back when it refuses less.
//
// A shrink must pay for itself. When the latency comes from outside what is
// admitted (other processes taking the CPU, a slow disk, refusals being
// answered), a smaller limit answers fewer decisions no faster, and a
// target-only rule walks the limit to its floor (1,023 answered a second
// where 5,400 were possible). So the window after a shrink is left to settle
// (it still carries decisions admitted before it), and the next one is
// compared with the window that caused the shrink: a shrink that lost more
// than half of the answers a second its cut would lose to outside latency
// is undone, with the shrinks before it since the target was last met, and
// the limit is held for a while before shrinking is tried again.
//
// Where it acts: past the limit a Guard.Decide is refused where the
// transport reads its headers (grpc.InTapHandle,
// api.GuardService.TapOverload), before authentication and validation cost
// anything; one that passes the tap while the limit still has room is
// admitted, or refused, by api.GuardService.AdmitUnary, the chain's first
// interceptor after the request id (at 150 % offered most calls did that,
// and each refusal paid for validation, authentication and a warning line
// when it came later in the chain); a DecideStream frame is refused where
// the stream's read loop takes it (refusedAsRead), before a worker,
// validation and the caller's checks; a replay (a grant) may use a reserve
// of an eighth above the limit (AcquirePriority; SECURITY.md). Nothing is
// decided on a refusal; the runner waits the hint and asks again.
package admission

import (
	"math"
	"sync"
	"time"
)

// Options tune a Limiter.
type Options struct {
	// Target is the mean decision latency the limit steers to (default 20ms).
	Target time.Duration
	// Min and Max bound the limit (defaults 8 and 4096); Initial is where it
	// starts (default 256).
	Min, Max, Initial int
	// Window is how often the limit and the hint are adjusted (default
	// 5×Target, at least 50ms): long enough to average out one slow batch.
	Window time.Duration
	// MaxRetryAfter caps the retry hint (default 2s); its floor is 2×Target.
	MaxRetryAfter time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// shedShare is the refusals per admitted decision the hint steers to.
const shedShare = 0.2

const (
	// judgedCut is the least cut of the limit (a share of it) that is
	// judged afterwards; smaller trims near the target are not.
	judgedCut = 0.1
	// holdWindows is how long a limit whose shrink did not help is held
	// before shrinking is tried again.
	holdWindows = 20
)

// Limiter is an adaptive limit on concurrent decisions; safe for
// concurrent use.
type Limiter struct {
	o Options

	mu       sync.Mutex
	limit    float64
	inflight int
	retry    time.Duration

	// The current window.
	start        time.Time
	done, shed   int
	took         time.Duration
	peakInflight int

	// The last shrink, while it awaits judgement: the limit before it and
	// the answers a second of the window that caused it.
	judging    bool
	shrankFrom float64
	shrankRate float64
	// slowFrom is the limit before the first shrink since a window last
	// met the target (0 while they do).
	slowFrom float64
	// settle skips judging the window right after a shrink; hold counts
	// the windows a futile shrink keeps the limit from shrinking again.
	settle bool
	hold   int
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
	if o.Window <= 0 {
		o.Window = max(5*o.Target, 50*time.Millisecond)
	}
	if o.MaxRetryAfter < 2*o.Target {
		o.MaxRetryAfter = max(2*time.Second, 2*o.Target)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{o: o, limit: float64(o.Initial), retry: 2 * o.Target, start: o.Now()}
}

// Acquire admits one decision, or reports false when the limit is reached.
// An admitted decision must call Release with how long it took.
func (l *Limiter) Acquire() bool { return l.acquire(false) }

// AcquirePriority admits a decision that may use the reserve above the
// limit (an eighth of it, at least one): few decisions, each the last step
// of work already done — an approved action's replay, which a human is
// waiting on. It still counts in flight and in the latency the limit
// steers by, and past the reserve it is refused like any other.
func (l *Limiter) AcquirePriority() bool { return l.acquire(true) }

func (l *Limiter) acquire(priority bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuseLocked(priority) {
		return false
	}
	l.inflight++
	l.peakInflight = max(l.peakInflight, l.inflight)
	return true
}

// Saturated reports whether the next Acquire would refuse, without
// admitting anything: a transport-level check that refuses before a
// refusal costs authentication and decoding. A true counts as a refusal.
func (l *Limiter) Saturated() bool { return l.saturated(false) }

// SaturatedPriority is Saturated for AcquirePriority.
func (l *Limiter) SaturatedPriority() bool { return l.saturated(true) }

func (l *Limiter) saturated(priority bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refuseLocked(priority)
}

// refuseLocked reports (and counts, for the retry hint) a refusal at the
// limit, or for priority past the reserve above it.
func (l *Limiter) refuseLocked(priority bool) bool {
	ceiling := int(l.limit)
	if priority {
		ceiling += max(1, ceiling/8)
	}
	if l.inflight >= ceiling {
		l.shed++
		return true
	}
	return false
}

// Release ends an admitted decision and, at the end of a window, adjusts
// the limit and the retry hint. It returns the limit now.
func (l *Limiter) Release(took time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	l.done++
	l.took += took
	if now := l.o.Now(); now.Sub(l.start) >= l.o.Window {
		l.adjust(float64(l.done) / now.Sub(l.start).Seconds())
		l.start, l.done, l.shed, l.took, l.peakInflight = now, 0, 0, 0, l.inflight
	}
	return int(l.limit)
}

// adjust ends a window that answered rate decisions a second (called
// with mu held and done > 0).
func (l *Limiter) adjust(rate float64) {
	l.adjustLimit(l.took/time.Duration(l.done), rate)
	// Steer the refusals toward shedShare of the admitted decisions: the
	// hint scales by how far off they are (at most ×2 or ×½ a window).
	ratio := float64(l.shed) / float64(l.done) / shedShare
	l.retry = time.Duration(float64(l.retry) * min(2, max(0.5, ratio)))
	l.retry = min(l.o.MaxRetryAfter, max(2*l.o.Target, l.retry))
}

func (l *Limiter) adjustLimit(mean time.Duration, rate float64) {
	if l.hold > 0 {
		l.hold--
	}
	if l.settle {
		// Still mostly decisions admitted under the old limit.
		l.settle = false
		return
	}
	// Only a limit in use moves: a slow window with the decisions in flight
	// far below the limit (an fsync stall at everyday load) is not what
	// the limit admits, and shrinking it would only shed later.
	busy := l.peakInflight >= int(l.limit)/2
	slow := mean > l.o.Target
	// A shrink helped when it kept most of the answers a second: it
	// removed queueing, not work. By Little's law, a cut of the limit to
	// a share c of it keeps every answer when the latency was all queueing
	// and only c of them when the latency comes from outside what is
	// admitted (other processes taking the CPU, refusals being answered);
	// a shrink that kept less than halfway, (1+c)/2, did not pay. (Batching
	// makes a busy server answer a few fewer at a lower limit even when the
	// shrink helps.) Judged by the latency alone, windows made faster by
	// chance — contention comes and goes — passed shrinks that only cut
	// what is admitted, and walked the limit down to its floor.
	if l.judging && slow && busy {
		if c := l.limit / l.shrankFrom; rate < l.shrankRate*(1+c)/2 {
			// Not ours, and most likely neither was the latency behind
			// the shrinks since the target was last met (a chance-fast
			// window passed them): back to where that began, and hold.
			l.limit, l.judging, l.hold = max(l.shrankFrom, l.slowFrom), false, holdWindows
			return
		}
	}
	l.judging = false
	if !slow {
		l.slowFrom = 0
	}
	switch {
	case busy && slow && l.hold > 0:
		// Held after a futile shrink.
	case busy && slow:
		// Proportional: twice the target halves the limit, at most.
		shrunk := max(float64(l.o.Min), l.limit*max(0.5, float64(l.o.Target)/float64(mean)))
		if shrunk < l.limit {
			if l.slowFrom == 0 {
				l.slowFrom = l.limit
			}
			// A trim near the target is not judged: too small to tell
			// from noise, and too small to walk the limit down.
			l.judging = shrunk <= (1-judgedCut)*l.limit
			l.shrankFrom, l.shrankRate, l.settle = l.limit, rate, true
			l.limit = shrunk
		}
	case busy:
		// Meeting the target while busy: there may be room for more.
		l.limit = min(float64(l.o.Max), l.limit+max(1, math.Sqrt(l.limit)))
	case !slow && l.limit < float64(l.o.Initial):
		// Fast and quiet after a shrink: back toward where it started, so
		// the next burst of an everyday load is not refused by a limit set
		// during the last stall.
		l.limit = min(float64(l.o.Initial), l.limit+max(1, math.Sqrt(l.limit)))
	}
}

// Limit is the current limit and the decisions in flight.
func (l *Limiter) Limit() (limit, inflight int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit), l.inflight
}

// RetryAfter is the hint a refused caller gets: 2×Target while refusals
// are rare, longer while waiting callers outnumber what the server admits.
func (l *Limiter) RetryAfter() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retry
}
