// Package reconnect keeps a long-lived stream up: run it, and when it ends
// wait with exponential back-off (reset after a healthy run) and run it
// again, until the context ends. Both runner streams (DecideStream and
// Connect) use it.
package reconnect

import (
	"context"
	"log/slog"
	"time"
)

// Loop calls once until ctx ends. once reports whether its stream was ever
// healthy (then the back-off starts over) and why it ended. min and max
// default to 100 ms and 5 s.
func Loop(ctx context.Context, log *slog.Logger, name string, minB, maxB time.Duration, once func(attempt int) (healthy bool, err error)) error {
	if minB <= 0 {
		minB = 100 * time.Millisecond
	}
	if maxB <= 0 {
		maxB = 5 * time.Second
	}
	backoff := minB
	for n := 0; ctx.Err() == nil; n++ {
		healthy, err := once(n)
		if ctx.Err() != nil {
			break
		}
		if healthy {
			backoff = minB
		}
		log.Warn(name+" stream down; reconnecting", "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(backoff*2, maxB)
	}
	return ctx.Err()
}
