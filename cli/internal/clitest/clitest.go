// Package clitest starts a real clawguard-server for the cli module's tests:
// the binary built from this tree, serving gRPC on loopback over a fresh
// Postgres database (migrations/pgtest), with its operator token file, and
// hands out connections and tokens. No part of the server is faked.
//
// A test package using it needs TestMain: os.Exit(clitest.Main(m)).
package clitest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Main runs the package's tests with pgtest's database cluster and removes
// the server binary afterwards.
func Main(m *testing.M) int {
	code := pgtest.Main(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	return code
}

var (
	buildOnce sync.Once
	binDir    string
	serverBin string
	buildErr  error
)

// Binary builds clawguard-server from this tree once per test binary and
// returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "clitest-"); buildErr != nil {
			return
		}
		serverBin = filepath.Join(binDir, "clawguard-server")
		if out, err := exec.Command("go", "build", "-o", serverBin, "github.com/clawguard/clawguard/server/cmd/clawguard-server").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build clawguard-server: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return serverBin
}

// Server is one clawguard-server process and what a test needs to reach it.
type Server struct {
	Addr      string      // gRPC, loopback
	DBURL     string      // its own fresh database
	TokenFile string      // the operator token file
	Dir       string      // a temporary directory of the test's (the token file's)
	Logs      *SyncBuffer // the server's output; a test may write its own next to it
	stop      func()
}

// Start runs a server on a free loopback port over a fresh, empty database
// (the server migrates it) and waits until it is SERVING with its operator
// token written. It is stopped when the test ends; if the test failed, the
// log is printed.
func Start(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{Addr: freeAddr(t), DBURL: pgtest.NewEmptyDB(t), TokenFile: filepath.Join(dir, "operator.token"),
		Dir: dir, Logs: &SyncBuffer{}}
	Binary(t)
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("server log:\n%s", s.Logs.String())
		}
	})
	s.Run(t)
	return s
}

// Run starts the server process (again, after Stop) on the same address
// and database and waits until it is SERVING.
func (s *Server) Run(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, Binary(t), "serve", "--database-url", s.DBURL, "--auto-migrate",
		"--listen", s.Addr, "--metrics-listen", "", "--operator-token-file", s.TokenFile,
		"--shutdown-timeout", "1s") // a live watch stream would hold a graceful stop for the default 10s
	cmd.Stdout, cmd.Stderr = s.Logs, s.Logs
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); _ = cmd.Wait() }) }
	s.waitServing(t)
}

// Stop stops the server gracefully (SIGTERM) and waits for it; idempotent.
func (s *Server) Stop() {
	if s.stop != nil {
		s.stop()
	}
}

// Restart stops the server and starts it again on the same address and
// database.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.Run(t)
}

func (s *Server) waitServing(t testing.TB) {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	var (
		last    healthpb.HealthCheckResponse_ServingStatus
		lastErr error
	)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		last, lastErr = resp.GetStatus(), err
		if err == nil && last == healthpb.HealthCheckResponse_SERVING {
			if _, err := os.Stat(s.TokenFile); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never became SERVING (last: %v, %v)\n%s", last, lastErr, s.Logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
}

// OperatorToken is the secret of the server's operator token.
func (s *Server) OperatorToken(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(s.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Dial connects to the server with a bearer token ("" sends none); the
// connection is closed when the test ends.
func (s *Server) Dial(t testing.TB, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(Bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Operator is a connection with the operator token.
func (s *Server) Operator(t testing.TB) *grpc.ClientConn {
	t.Helper()
	return s.Dial(t, s.OperatorToken(t))
}

// Token mints a token through the operator's CreateToken (the same RPC
// ncl tokens create makes) and returns its secret.
func (s *Server) Token(t testing.TB, req *guardv1.CreateTokenRequest) string {
	t.Helper()
	res, err := guardv1.NewRegistryClient(s.Operator(t)).CreateToken(context.Background(), req)
	if err != nil {
		t.Fatalf("create %v token: %v", req.GetKind(), err)
	}
	return res.GetSecret()
}

// DB is a pool on the server's database, for what a test sets up or reads
// directly; closed when the test ends.
func (s *Server) DB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Bearer is per-RPC bearer-token credentials over plaintext loopback.
type Bearer string

// GetRequestMetadata sends the token ("" sends nothing).
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: tests talk over loopback.
func (Bearer) RequireTransportSecurity() bool { return false }

// WaitFor polls cond until it holds, failing the test after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// output, a logger) and readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
