package admission

import (
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestRefusesPastTheLimitAndAdmitsAgainAfterRelease(t *testing.T) {
	l := New(Options{Initial: 2, Min: 2, Max: 2})
	if !l.Acquire() || !l.Acquire() {
		t.Fatal("the first two decisions were not admitted")
	}
	if l.Acquire() {
		t.Fatal("a third decision was admitted past a limit of 2")
	}
	l.Release(time.Millisecond)
	if !l.Acquire() {
		t.Fatal("a slot freed by Release was not reusable")
	}
}

func TestSlowDecisionsShrinkTheLimitOncePerCooldown(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	l := New(Options{Initial: 100, Min: 10, Target: 10 * time.Millisecond, Cooldown: time.Second, Now: c.now})
	for i := 0; i < 5; i++ {
		l.Acquire()
	}
	for i := 0; i < 5; i++ {
		l.Release(50 * time.Millisecond) // all slow, within one cooldown
	}
	if lim, _ := l.Limit(); lim != 90 {
		t.Fatalf("limit after one slow burst = %d, want 90 (one decrease)", lim)
	}
	c.t = c.t.Add(time.Second)
	l.Acquire()
	l.Release(50 * time.Millisecond)
	if lim, _ := l.Limit(); lim != 81 {
		t.Fatalf("limit after the next cooldown = %d, want 81", lim)
	}
	for i := 0; i < 100; i++ {
		c.t = c.t.Add(time.Second)
		l.Acquire()
		l.Release(time.Second)
	}
	if lim, _ := l.Limit(); lim != 10 {
		t.Fatalf("limit never goes below Min: %d", lim)
	}
}

func TestFastDecisionsGrowABusyLimitButNotAnIdleOne(t *testing.T) {
	l := New(Options{Initial: 10, Max: 12, Target: time.Second})
	// Idle: one at a time never grows it.
	for i := 0; i < 100; i++ {
		l.Acquire()
		l.Release(time.Millisecond)
	}
	if lim, _ := l.Limit(); lim != 10 {
		t.Fatalf("an idle limit grew to %d", lim)
	}
	// Busy: many at once, all fast: it grows, up to Max.
	for round := 0; round < 200; round++ {
		n := 0
		for l.Acquire() {
			n++
		}
		for i := 0; i < n; i++ {
			l.Release(time.Millisecond)
		}
	}
	if lim, _ := l.Limit(); lim != 12 {
		t.Fatalf("a busy, fast limit is %d, want Max 12", lim)
	}
}
