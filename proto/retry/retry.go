// Package retry makes every retry delay of the server, the runner, ncl and
// the bridges: cenkalti/backoff's exponential back-off, always with jitter. A literal
// backoff.ExponentialBackOff leaves RandomizationFactor at 0, which in
// backoff v5 means none: clients that failed together (a server restart)
// would come back together, again and again. Every retry loop takes its
// delays from Exponential; a test (retry_test.go) walks the
// repository and fails on a back-off made any other way.
package retry

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Jitter is how far each delay may fall from its step, either way: a delay
// of step d is drawn from [d·(1−Jitter), d·(1+Jitter)].
const Jitter = 0.25

// Exponential is a back-off whose steps double from initial up to max, each
// delay jittered by ±Jitter.
func Exponential(initial, max time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{InitialInterval: initial, RandomizationFactor: Jitter, Multiplier: 2, MaxInterval: max}
	b.Reset()
	return b
}

// Around reports whether d is a jittered delay of step: what tests of a
// retry loop assert instead of exact delays.
func Around(d, step time.Duration) bool {
	lo := time.Duration(float64(step) * (1 - Jitter))
	hi := time.Duration(float64(step)*(1+Jitter)) + 1
	return d >= lo && d <= hi
}
