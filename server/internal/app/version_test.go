package app_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/app"
)

// TestVersionHeaderWithoutToken: every answer, a token-less health check
// included, carries the server's version (what `ncl version` prints).
func TestVersionHeaderWithoutToken(t *testing.T) {
	srv, _ := start(t, pgtest.NewDB(t), false)
	var md metadata.MD
	if _, err := healthpb.NewHealthClient(dial(t, srv.Addr())).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
		t.Fatal(err)
	}
	if v := md.Get(app.VersionHeader); len(v) != 1 || v[0] != app.Version {
		t.Fatalf("%s = %v, want [%s]", app.VersionHeader, v, app.Version)
	}
}
