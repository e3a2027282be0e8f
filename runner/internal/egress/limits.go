package egress

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what one session's egress may hold open and open.
type Limits struct {
	// MaxOpen is how many connections a session may have open at once.
	MaxOpen int
	// Rate and Burst bound how fast a session opens new connections
	// (a token bucket: Burst at once, then Rate a second).
	Rate  float64
	Burst int
	// Idle closes a connection with no bytes either way for this long;
	// MaxDuration closes any connection this long after it opened.
	Idle, MaxDuration time.Duration
	// HoldWait is how long a held connection waits for its approval
	// before the proxy answers 403 naming the hold.
	HoldWait time.Duration
	// DialTimeout bounds resolving and connecting to the destination.
	DialTimeout time.Duration
}

// DefaultLimits are the runner's defaults (its --egress-* flags).
var DefaultLimits = Limits{
	MaxOpen: 128, Rate: 20, Burst: 60,
	Idle: 10 * time.Minute, MaxDuration: 4 * time.Hour,
	HoldWait: 20 * time.Second, DialTimeout: 10 * time.Second,
}

// Validate refuses limits that would refuse everything or nothing.
func (l Limits) Validate() error {
	switch {
	case l.MaxOpen < 1:
		return fmt.Errorf("egress: max open connections must be at least 1, not %d", l.MaxOpen)
	case l.Rate <= 0 || l.Burst < 1:
		return fmt.Errorf("egress: connection rate %.3g/s burst %d: both must be positive", l.Rate, l.Burst)
	case l.Idle <= 0 || l.MaxDuration <= 0 || l.DialTimeout <= 0:
		return fmt.Errorf("egress: idle, maximum and dial durations must be positive")
	case l.HoldWait < 0:
		return fmt.Errorf("egress: the hold wait must not be negative")
	}
	return nil
}

// gate is one session's admission: a rate of new connections and a bound
// on open ones.
type gate struct {
	limits Limits
	rate   *rate.Limiter
	open   chan struct{}
}

func newGate(l Limits) *gate {
	return &gate{limits: l, rate: rate.NewLimiter(rate.Limit(l.Rate), l.Burst), open: make(chan struct{}, l.MaxOpen)}
}

// refusal is why the gate turned a connection away, for the 429 answer.
type refusal struct {
	limit      string // "rate" or "open"
	text       string
	retryAfter time.Duration
}

// admit takes a slot for a new connection, or says which limit refused it.
// release gives the slot back when the connection closes.
func (g *gate) admit(now time.Time) (release func(), r *refusal) {
	res := g.rate.ReserveN(now, 1)
	if !res.OK() {
		return nil, &refusal{limit: "rate", text: "connection rate limit", retryAfter: time.Second}
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return nil, &refusal{limit: "rate", retryAfter: d,
			text: fmt.Sprintf("this session opens at most %.3g connections a second (burst %d)", g.limits.Rate, g.limits.Burst)}
	}
	select {
	case g.open <- struct{}{}:
		return func() { <-g.open }, nil
	default:
		return nil, &refusal{limit: "open", retryAfter: time.Second,
			text: fmt.Sprintf("this session has %d connections open, the most it may", g.limits.MaxOpen)}
	}
}
