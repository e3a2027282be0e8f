package app

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/failover"
)

// TestDrainEndsLongLivedStreamsWithTheStoppingTrailer: a stream that would
// run forever (health Watch) ends Unavailable with the trailer at once when
// the replica stops, GracefulStop is not held up by it, and a stream opened
// while stopping is refused the same way.
func TestDrainEndsLongLivedStreamsWithTheStoppingTrailer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := newDrain()
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.ChainStreamInterceptor(d.stream)}, keepaliveOptions(time.Hour)...)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil { // the first status: the stream is up
		t.Fatal(err)
	}
	stopped := time.Now()
	d.stop()
	_, err = watch.Recv()
	if status.Code(err) != codes.Unavailable || len(watch.Trailer().Get(failover.StoppingKey)) == 0 {
		t.Fatalf("the watch after stop: %v, trailer %v; want Unavailable with %s", err, watch.Trailer(), failover.StoppingKey)
	}
	again, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = again.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a stream opened while stopping: %v, want Unavailable", err)
	}
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("GracefulStop waited for a drained stream")
	}
	if took := time.Since(stopped); took > 3*time.Second {
		t.Fatalf("drain and stop took %s", took)
	}
}
