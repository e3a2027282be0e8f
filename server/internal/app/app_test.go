package app_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/config"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func start(t *testing.T, dbURL string, autoMigrate bool) (*app.Server, string) {
	t.Helper()
	cfg := config.Default()
	cfg.DatabaseURL = dbURL
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.AutoMigrate = autoMigrate
	cfg.OperatorTokenFile = filepath.Join(t.TempDir(), "operator.token")
	srv, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return srv, cfg.OperatorTokenFile
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func waitHealth(t *testing.T, conn *grpc.ClientConn, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && res.GetStatus() == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never became %v (last %v, %v)", want, res.GetStatus(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServesHealthReflectionAndRequiresAuth(t *testing.T) {
	srv, _ := start(t, pgtest.NewEmptyDB(t), true)
	conn := dial(t, srv.Addr())
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING)

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	sort.Strings(names)
	got := strings.Join(names, ",")
	for _, want := range []string{"guard.v1.Approvals", "guard.v1.Guard", "guard.v1.Registry", "grpc.health.v1.Health"} {
		if !strings.Contains(got, want) {
			t.Errorf("reflection lists %s, missing %s", got, want)
		}
	}

	_, err = guardv1.NewRegistryClient(conn).ListGroups(context.Background(), &guardv1.ListGroupsRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unauthenticated call: want Unauthenticated, got %v", err)
	}
}

func TestNotServingUntilSchemaCurrent(t *testing.T) {
	srv, _ := start(t, pgtest.NewEmptyDB(t), false)
	conn := dial(t, srv.Addr())
	waitHealth(t, conn, healthpb.HealthCheckResponse_NOT_SERVING)
}

func TestPortInUseIsOneClearError(t *testing.T) {
	srv, _ := start(t, pgtest.NewDB(t), false)
	cfg := config.Default()
	cfg.DatabaseURL = pgtest.NewDB(t)
	cfg.Listen = srv.Addr()
	cfg.MetricsListen = ""
	_, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "listen on "+srv.Addr()) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line naming the address, got %v", err)
	}
}
