package app

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestReadyzFollowsTheServerStreams: /healthz answers while the process
// does; /readyz is 503 until both streams to the server are up.
func TestReadyzFollowsTheServerStreams(t *testing.T) {
	var up atomic.Bool
	mux := metricsMux(newMetricsRegistry(), up.Load)
	probe := func(path string) int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if c := probe("/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz: %d", c)
	}
	if c := probe("/readyz"); c != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while disconnected: %d", c)
	}
	up.Store(true)
	if c := probe("/readyz"); c != http.StatusOK {
		t.Fatalf("/readyz while connected: %d", c)
	}
	if c := probe("/metrics"); c != http.StatusOK {
		t.Fatalf("/metrics: %d", c)
	}
}
