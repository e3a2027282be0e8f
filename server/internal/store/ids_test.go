package store

import (
	"regexp"
	"testing"
	"time"
)

func TestOrderedIDsSortByTimeAndStayUnguessable(t *testing.T) {
	shape := regexp.MustCompile(`^dec_[0-9a-f]{28}$`)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	prev := ""
	seen := map[string]bool{}
	for i := range 2000 {
		id := NewOrderedID("dec_", t0.Add(time.Duration(i)*time.Millisecond))
		if !shape.MatchString(id) {
			t.Fatalf("%q does not look like dec_ + 28 hex digits", id)
		}
		if id <= prev {
			t.Fatalf("%q made after %q sorts before it", id, prev)
		}
		if seen[id] {
			t.Fatalf("%q twice", id)
		}
		seen[id], prev = true, id
	}
	// The same millisecond: distinct, by the 64 random bits.
	a, b := NewOrderedID("dec_", t0), NewOrderedID("dec_", t0)
	if a == b || a[:16] != b[:16] {
		t.Fatalf("same-millisecond ids %q and %q: want the same time prefix and different random parts", a, b)
	}
}
