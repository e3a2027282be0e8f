package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/runner/internal/lease"
	"github.com/clawguard/clawguard/runner/internal/metrics"
)

// TestReadyzSaysWhatIsTrue: /healthz answers while the process does;
// /readyz is 503 until both streams to the server were up, while a
// --group's session is not open, while the runner is fenced, and once a
// stream has been down longer than readyGrace — not during a quick move to
// another replica.
func TestReadyzSaysWhatIsTrue(t *testing.T) {
	reg := newMetricsRegistry()
	r := &Runner{lease: lease.New(nil), Metrics: metrics.NewMetrics(reg.Registry)}
	mux := metricsMux(reg, r.ready)
	probe := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	want := func(what string, code int, words string) {
		t.Helper()
		c, body := probe("/readyz")
		if c != code || !strings.Contains(body, words) {
			t.Fatalf("/readyz %s: %d %q, want %d with %q", what, c, body, code, words)
		}
	}
	if c, _ := probe("/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz: %d", c)
	}
	want("before any stream", http.StatusServiceUnavailable, "not connected")
	r.setUp(0, true)
	r.setUp(1, true)
	want("with both streams up", http.StatusOK, "ok")

	r.setUp(1, false) // a move to another replica
	want("a moment after a stream broke", http.StatusOK, "ok")
	r.upMu.Lock()
	r.rd.downAt = time.Now().Add(-readyGrace - time.Second)
	r.upMu.Unlock()
	want("a stream down past the grace", http.StatusServiceUnavailable, "not connected to the server for")
	r.setUp(1, true)
	want("reconnected", http.StatusOK, "ok")

	r.upMu.Lock()
	r.rd.unopened = map[string]string{"research": "agent group not found"}
	r.upMu.Unlock()
	want("with a --group session not open", http.StatusServiceUnavailable, "research (agent group not found)")
	r.upMu.Lock()
	r.rd.unopened = nil
	r.upMu.Unlock()

	// A renewal long ago: the tracker fences the runner.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.lease.Renewed(time.Now().Add(-time.Minute), 3*time.Second)
	go r.lease.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for !r.lease.Fenced() {
		if time.Now().After(deadline) {
			t.Fatal("the tracker never fenced the runner")
		}
		time.Sleep(10 * time.Millisecond)
	}
	want("while fenced", http.StatusServiceUnavailable, "fenced")
	if c, _ := probe("/metrics"); c != http.StatusOK {
		t.Fatalf("/metrics: %d", c)
	}
}
