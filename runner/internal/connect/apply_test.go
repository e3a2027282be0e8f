package connect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

type failingApplier struct {
	err   error
	tries int
}

func (f *failingApplier) Apply(context.Context, *guardv1.Push) error {
	f.tries++
	return f.err
}

// A push whose Apply keeps answering Retry is tried again 200 ms, then
// 400 ms later (each ±25 %), and given up on once the next try would start
// past RetryFor (800 ms ±25 % more would end past 1 s).
func TestApplyRetriesWithBackoffUntilRetryFor(t *testing.T) {
	f := &failingApplier{err: Retry(errors.New("database down"))}
	c := &Client{Applier: f, RetryFor: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	start := time.Now()
	err := c.apply(context.Background(), &guardv1.Push{Id: "p1"})
	took := time.Since(start)
	if !IsRetry(err) || !strings.Contains(err.Error(), "still not applied after 1s") {
		t.Fatalf("apply = %v, want the retryable error, given up", err)
	}
	if f.tries != 3 {
		t.Fatalf("%d tries, want 3 (at 0, 200 and 600 ms, each ±25 %%)", f.tries)
	}
	if took < 450*time.Millisecond || took >= time.Second {
		t.Fatalf("gave up after %s, want from 450 ms to under RetryFor", took)
	}
}

// An error not marked Retry is the answer at once; so is the context's end.
func TestApplyReturnsOtherErrorsAtOnce(t *testing.T) {
	f := &failingApplier{err: errors.New("bad payload")}
	c := &Client{Applier: f, RetryFor: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := c.apply(context.Background(), &guardv1.Push{Id: "p1"}); err == nil || IsRetry(err) || f.tries != 1 {
		t.Fatalf("apply = %v after %d tries, want the error after 1", err, f.tries)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f = &failingApplier{err: Retry(errors.New("database down"))}
	c.Applier = f
	if err := c.apply(ctx, &guardv1.Push{Id: "p1"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply after cancel = %v, want context.Canceled", err)
	}
}
