package guardtest

import (
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/clawguard/clawguard/server/internal/testserver"
)

// BenchmarkGRPCHealthFloor is the cost of a bare unary call to the same
// server (health: no auth, no database) — the floor under Decide.
func BenchmarkGRPCHealthFloor(b *testing.B) {
	srv := testserver.Start(b)
	c := healthpb.NewHealthClient(srv.Conn(b, "", ""))
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
