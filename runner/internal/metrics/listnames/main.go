// Command listnames prints, in the Prometheus text format, every metric family the
// runner exports once its metrics are built and pre-initialised. deploy/'s
// tests run it to check that every metric a rule, alert or dashboard names
// really exists (deploy cannot import an internal package, but it can run one).
package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/metrics"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
)

func main() {
	reg := metrics.NewRegistry()
	metrics.NewMetrics(reg).PreInit([]string{"send_message"})
	egress.NewMetrics(reg)
	// The model gateway's series are labelled by provider (and model) on use.
	modelgw.NewMetrics(reg).Example()
	metrics.RegisterBuildInfo(reg, "dev")
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		fmt.Fprintf(os.Stderr, "gather: %d %s\n", rec.Code, rec.Body)
		os.Exit(1)
	}
	os.Stdout.Write(rec.Body.Bytes())
}
