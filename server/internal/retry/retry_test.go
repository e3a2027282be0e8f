package retry

import (
	"slices"
	"testing"
	"time"
)

// Issue 29: back-offs made together must not wait in lockstep; each delay
// stays within its step's jitter. (The repository-wide check that every
// back-off comes from a helper is runner/internal/retry's.)
func TestBackOffsStartedTogetherDoNotWaitInLockstep(t *testing.T) {
	a, b := Exponential(time.Second, 8*time.Second), Exponential(time.Second, 8*time.Second)
	var da, db []time.Duration
	step := time.Second
	for range 5 {
		x, y := a.NextBackOff(), b.NextBackOff()
		if !Around(x, step) || !Around(y, step) {
			t.Fatalf("delays %v and %v, want each within ±%.0f%% of %v", x, y, Jitter*100, step)
		}
		da, db = append(da, x), append(db, y)
		step = min(2*step, 8*time.Second)
	}
	if slices.Equal(da, db) {
		t.Fatalf("two back-offs waited the same: %v", da)
	}
}
