package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/config"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/lease"
	"github.com/clawguard/clawguard/runner/internal/runtime/process"
)

// failingRegistry refuses the first registrations with its code.
type failingRegistry struct {
	guardv1.UnimplementedRegistryServer
	code  codes.Code
	fails int32
	calls atomic.Int32
}

func (f *failingRegistry) RegisterRunner(context.Context, *guardv1.RegisterRunnerRequest) (*guardv1.RegisterRunnerResponse, error) {
	if f.calls.Add(1) <= f.fails {
		return nil, status.Error(f.code, "the database refused the operation")
	}
	return &guardv1.RegisterRunnerResponse{HeartbeatInterval: durationpb.New(time.Second), LeaseTtl: durationpb.New(3 * time.Second)}, nil
}

func registering(t *testing.T, f *failingRegistry) *Runner {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	guardv1.RegisterRegistryServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &Runner{Config: config.Config{ID: "r1"}, Log: log, regCli: guardv1.NewRegistryClient(conn),
		Actions: delivery.NewRegistry(log), Runtime: process.New(process.Config{InstallID: "r1", Logger: log}), lease: lease.New(log)}
}

// A server failing while it restarts or fails over answered Internal, and
// the runner stopped for good — its sessions' deliveries waited for an
// operator. Only a refused token or request is final.
func TestRegistrationIsRetriedUnlessTheRunnerItselfIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, code := range []codes.Code{codes.Internal, codes.Unknown, codes.Unavailable, codes.AlreadyExists} {
		f := &failingRegistry{code: code, fails: 2}
		if err := registering(t, f).Register(ctx); err != nil || f.calls.Load() != 3 {
			t.Fatalf("%v twice: Register = %v after %d calls, want registered on the third", code, err, f.calls.Load())
		}
	}
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument} {
		f := &failingRegistry{code: code, fails: 100}
		if err := registering(t, f).Register(ctx); status.Code(err) != code || f.calls.Load() != 1 {
			t.Fatalf("%v: Register = %v after %d calls, want that refusal at once", code, err, f.calls.Load())
		}
	}
}
