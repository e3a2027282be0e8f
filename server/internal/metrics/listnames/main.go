// Command listnames prints, in the Prometheus text format, every metric family the
// server exports once its metrics are built, pre-initialised and the gRPC
// metrics know a method. deploy/'s tests run it to check that every metric a
// rule, alert or dashboard names really exists (deploy cannot import an
// internal package, but it can run one).
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/server/internal/metrics"
)

// oneMethod stands in for the gRPC server so every grpc_server_* family shows.
type oneMethod struct{}

func (oneMethod) GetServiceInfo() map[string]grpc.ServiceInfo {
	return map[string]grpc.ServiceInfo{
		"clawguard.guard.v1.Guard": {Methods: []grpc.MethodInfo{{Name: "Decide"}}},
	}
}

func main() {
	reg := metrics.NewRegistry()
	m := metrics.NewMetrics(reg)
	m.PreInit([]string{"a2a.send"}, []string{"a2a_message_gate"})
	// Series labelled by provider and model are made by the first call.
	m.Models.Settled("example", "example", "complete", [4]int64{1, 1, 1, 1}, 1)
	metrics.RegisterBuildInfo(reg, "dev")
	metrics.NewGRPCServerMetrics(reg).InitializeMetrics(oneMethod{})
	// A pool that never connects (pgxpool connects lazily) shows the pool families.
	pool, err := pgxpool.New(context.Background(), "postgres://listnames@127.0.0.1:1/none")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pool:", err)
		os.Exit(1)
	}
	metrics.NewPools(reg).Add("main", pool)
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		fmt.Fprintf(os.Stderr, "gather: %d %s\n", rec.Code, rec.Body)
		os.Exit(1)
	}
	os.Stdout.Write(rec.Body.Bytes())
}
