package app

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawguard/clawguard/runner/internal/metrics"
)

type metricsRegistry struct{ *prometheus.Registry }

func newMetricsRegistry() *metricsRegistry { return &metricsRegistry{metrics.NewRegistry()} }

func metricsMux(reg *metricsRegistry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(reg.Registry))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	return mux
}
