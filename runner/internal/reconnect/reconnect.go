// Package reconnect keeps a long-lived stream up: run it, and when it ends
// wait with exponential back-off (cenkalti/backoff; reset after a healthy
// run) and run it again, until the context ends. Both runner streams
// (DecideStream and Connect) use it. grpc-go backs off its own connection
// attempts; this is the delay between streams.
package reconnect

import (
	"context"
	"log/slog"
	"time"

	"github.com/clawguard/clawguard/proto/retry"
)

// Loop calls once until ctx ends. once reports whether its stream was ever
// healthy (then the back-off starts over) and why it ended. min and max
// default to 100 ms and 5 s; the delay doubles from min to max.
func Loop(ctx context.Context, log *slog.Logger, name string, minB, maxB time.Duration, once func(attempt int) (healthy bool, err error)) error {
	return loop(ctx, log, name, minB, maxB, once, sleep)
}

// loop is Loop with the wait injected (tests record the delays).
func loop(ctx context.Context, log *slog.Logger, name string, minB, maxB time.Duration, once func(attempt int) (bool, error), wait func(context.Context, time.Duration)) error {
	if minB <= 0 {
		minB = 100 * time.Millisecond
	}
	if maxB <= 0 {
		maxB = 5 * time.Second
	}
	delays := retry.Exponential(minB, maxB)
	for n := 0; ctx.Err() == nil; n++ {
		healthy, err := once(n)
		if ctx.Err() != nil {
			break
		}
		if healthy {
			delays.Reset()
		}
		d := delays.NextBackOff()
		log.Warn(name+" stream down; reconnecting", "err", err, "backoff", d)
		wait(ctx, d)
	}
	return ctx.Err()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
