package testserver_test

import (
	"context"
	"os"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestReplicasShareTheOperatorToken: every replica on one database accepts
// every replica's operator token once all of them are serving (each
// re-registers the file's token on its first SERVING flip). With a token file
// per replica the last flip won and the other replica's operator calls failed
// Unauthenticated at random (TestExpiryAndSweepEmitEvents's missing watch
// cursor header).
func TestReplicasShareTheOperatorToken(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	b := testserver.StartOn(t, a.URL)
	for _, s := range []*testserver.Server{a, b} {
		hc := healthpb.NewHealthClient(s.Conn(t, "", ""))
		testserver.Eventually(t, 10*time.Second, "replica serving", func() bool {
			res, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
			return err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING
		})
	}
	for _, on := range []*testserver.Server{a, b} {
		for _, tok := range []*testserver.Server{a, b} {
			c := testserver.ClientsFor(on.Conn(t, tok.OperatorToken, ""))
			if _, err := c.Registry.ListGroups(context.Background(), &guardv1.ListGroupsRequest{}); err != nil {
				t.Errorf("operator token of one replica on another: %v", err)
			}
		}
	}
}
