package reconnect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
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
