package reconnect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/clawguard/clawguard/proto/retry"
)

// Loop retries until the context ends and stops promptly once it does.
func TestLoopRetriesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var attempts []int
	err := Loop(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), "test", time.Millisecond, 2*time.Millisecond,
		func(n int) (bool, error) {
			attempts = append(attempts, n)
			if n == 3 {
				cancel()
			}
			return n%2 == 0, errors.New("down")
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Loop = %v, want context.Canceled", err)
	}
	if len(attempts) != 4 || attempts[3] != 3 {
		t.Fatalf("attempts = %v, want 0..3", attempts)
	}
}

// The delay doubles from min to max and starts over after a healthy run;
// each one is jittered (issue 29: runners reconnected in lockstep).
func TestLoopBacksOffAndStartsOverAfterAHealthyRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	healthy := map[int]bool{4: true}
	var waits []time.Duration
	err := loop(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), "test", 100*time.Millisecond, time.Second,
		func(n int) (bool, error) {
			if n == 8 {
				cancel()
			}
			return healthy[n], errors.New("down")
		},
		func(_ context.Context, d time.Duration) { waits = append(waits, d) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("loop = %v, want context.Canceled", err)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %d of them", waits, len(want))
	}
	for i := range want {
		if !retry.Around(waits[i], want[i]) {
			t.Fatalf("waits %v, want %v each ±%.0f%%", waits, want, retry.Jitter*100)
		}
	}
	if slices.Equal(waits[:4], waits[4:]) {
		t.Fatalf("waits %v: the same delays after the start-over (no jitter)", waits)
	}
}
