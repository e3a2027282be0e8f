package lease

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// clock is a fake clock: time moves only when the test advances it.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	armed   chan struct{} // a timer was set
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1000, 0), armed: make(chan struct{}, 16)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	c.armed <- struct{}{}
	return ch
}

// advanceTo moves the clock to at and fires the timers due.
func (c *clock) advanceTo(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(at) {
			w.ch <- at
		} else {
			keep = append(keep, w)
		}
	}
	c.waiters = keep
}

func (c *clock) waitArmed(t *testing.T) {
	t.Helper()
	select {
	case <-c.armed:
	case <-time.After(5 * time.Second):
		t.Fatal("the tracker never set its timer")
	}
}

type events struct {
	lost     chan time.Time // killBy
	regained chan time.Time // the context's deadline
}

func start(t *testing.T) (*Tracker, *clock, events) {
	t.Helper()
	c := newClock()
	tr := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	tr.now, tr.after = c.Now, c.After
	ev := events{lost: make(chan time.Time, 4), regained: make(chan time.Time, 4)}
	tr.OnLost = func(_ context.Context, killBy time.Time) { ev.lost <- killBy }
	tr.OnRegained = func(ctx context.Context) { d, _ := ctx.Deadline(); ev.regained <- d }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return tr, c, ev
}

func none(t *testing.T, ch chan time.Time, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s at %v", what, v)
	default:
	}
}

func got(t *testing.T, ch chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s", what)
	}
	return time.Time{}
}

// Issue 29, item 10: a runner cut off from the servers never noticed, and
// for ~13 s its sessions had two live agents. A runner whose last renewal
// that succeeded was sent at t fences itself at t + TTL − TTL/3, agents dead
// by t + TTL − TTL/6: before the lease can expire at t + TTL at the earliest.
func TestTheRunnerFencesItselfBeforeTheLeaseCanExpire(t *testing.T) {
	tr, c, ev := start(t)
	const ttl = 15 * time.Second
	t0 := c.Now()
	tr.Renewed(t0, ttl)
	c.waitArmed(t)
	c.advanceTo(t0.Add(9 * time.Second))
	none(t, ev.lost, "fenced before the margin")
	// A heartbeat answered: the deadline moves with its send time.
	tr.Renewed(t0.Add(5*time.Second), ttl)
	c.waitArmed(t)
	c.advanceTo(t0.Add(14 * time.Second))
	none(t, ev.lost, "fenced though renewed")
	c.advanceTo(t0.Add(15 * time.Second)) // 5 s + 15 s − 5 s
	killBy := got(t, ev.lost, "fence")
	if want := t0.Add(5*time.Second + ttl - Margin(ttl)/2); !killBy.Equal(want) {
		t.Fatalf("kill by %v, want %v", killBy, want)
	}
	if !killBy.Before(t0.Add(5*time.Second + ttl)) {
		t.Fatalf("agents may live until %v, past the earliest expiry", killBy)
	}
	if !tr.Fenced() {
		t.Fatal("not fenced after the fence")
	}
	// Renewed again (the link healed): the fence is lifted, with a context
	// that ends when the next fence would be due.
	sent := t0.Add(16 * time.Second)
	c.advanceTo(sent)
	tr.Renewed(sent, ttl)
	if d := got(t, ev.regained, "fence lifted"); !d.Equal(sent.Add(ttl - Margin(ttl))) {
		t.Fatalf("regained with deadline %v, want %v", d, sent.Add(ttl-Margin(ttl)))
	}
	if tr.Fenced() {
		t.Fatal("still fenced after the renewal")
	}
}

// A renewal older than the one recorded (answers out of order) does not
// move the deadline back; nothing is fenced before the first renewal.
func TestAnOlderRenewalDoesNotShortenTheLease(t *testing.T) {
	tr, c, ev := start(t)
	t0 := c.Now()
	c.advanceTo(t0.Add(time.Hour))
	none(t, ev.lost, "fenced with no lease yet")
	t1 := c.Now()
	tr.Renewed(t1, 3*time.Second)
	tr.Renewed(t1.Add(-2*time.Second), 3*time.Second)
	c.waitArmed(t)
	c.advanceTo(t1.Add(1999 * time.Millisecond))
	none(t, ev.lost, "fenced by the older renewal")
	c.advanceTo(t1.Add(2 * time.Second))
	got(t, ev.lost, "fence")
}
