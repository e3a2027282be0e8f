package app

import (
	"net/http"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// probes adds /healthz and /readyz next to /metrics, for load balancers and
// probes that cannot speak gRPC health (or not over the gRPC port's mTLS):
// /healthz answers 200 while the process serves HTTP; /readyz answers 200
// only while gRPC health reports SERVING (the database answers, the schema
// is current and the replica is not shutting down), else 503 with the
// status and why. /readyz?verbose also says what the database is: a primary
// with or without a synchronous standby, a standby, a single node.
func probes(mux *http.ServeMux, hs *health.Server, db *dbState) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		notServing, replication := db.get()
		res, err := hs.Check(r.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			st := "UNKNOWN"
			if err == nil {
				st = res.GetStatus().String()
			}
			if notServing != "" {
				st += ": " + notServing
			}
			http.Error(w, "not ready: "+st, http.StatusServiceUnavailable)
			return
		}
		body := "ok\n"
		if r.URL.Query().Has("verbose") {
			if replication == "" {
				replication = "not read yet"
			}
			body = "database: reachable, schema current\nreplication: " + replication + "\n" + body
		}
		_, _ = w.Write([]byte(body))
	})
}
