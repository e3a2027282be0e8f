package app

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawguard/clawguard/runner/internal/metrics"
)

type metricsRegistry struct{ *prometheus.Registry }

func newMetricsRegistry() *metricsRegistry { return &metricsRegistry{metrics.NewRegistry()} }

// metricsMux serves /metrics, /healthz (the process answers) and /readyz
// (not fenced, every --group's session open, both streams to the server up
// or down for less than readyGrace: decisions can be made), for load
// balancers and probes that cannot speak gRPC.
func metricsMux(reg *metricsRegistry, ready func() (bool, string)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(reg.Registry))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := ready(); !ok {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}
