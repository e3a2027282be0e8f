// Package gwe2e runs the model gateway against the real server binary on a
// real Postgres, over real gRPC, with the official SDKs as its clients —
// in-process over the session's socket, and inside a real Docker container
// whose only way out is that socket (clawguard-init forwarding its
// loopback to it), against a fake provider over TLS on the host's
// loopback, which the gateway trusts through its CA bundle.
//
// It builds the runner's session endpoints itself (egress.Proxy with the
// gateway as its origin handler), not through the runner's app.
package gwe2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

var (
	bins      string
	serverBin string
	initBin   string
	clientBin string
	imageErr  error // nil when the SDK client's image was built
)

const clientImage = "clawguard-modelgw-sdkclient:e2e"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cg-modelgw-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = dir
	serverBin, initBin, clientBin = filepath.Join(dir, "clawguard-server"), filepath.Join(dir, "clawguard-init"), filepath.Join(dir, "sdkclient")
	for _, b := range []struct{ out, pkg string }{
		{serverBin, "github.com/clawguard/clawguard/server/cmd/clawguard-server"},
		{initBin, "github.com/clawguard/clawguard/runner/cmd/clawguard-init"},
		{clientBin, "github.com/clawguard/clawguard/runner/internal/modelgw/testdata/sdkclient"},
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	imageErr = buildClientImage()
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

func needDocker(t *testing.T) {
	t.Helper()
	if imageErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker: %v", imageErr)
		}
		t.Skipf("docker not available: %v", imageErr)
	}
}

// server is one clawguard-server process on a fresh database.
type server struct {
	addr, opToken string
	op, runner    clients // the operator; runner r1 itself
	pool          *pgxpool.Pool
}

type clients struct {
	guard     guardv1.GuardClient
	approvals guardv1.ApprovalsClient
	registry  guardv1.RegistryClient
}

func startServer(t testing.TB) *server {
	t.Helper()
	db := pgtest.NewDB(t)
	dir := t.TempDir()
	s := &server{addr: freeAddr(t)}
	tokFile := filepath.Join(dir, "operator.token")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, serverBin, "serve", "--database-url", db, "--listen", s.addr, "--metrics-listen", "",
		"--auto-migrate", "--operator-token-file", tokFile, "--log-level", "warn", "--shutdown-timeout", "2s")
	logf, _ := os.Create(filepath.Join(dir, "server.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { cancel(); cmd.Wait() })
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("server log:\n%s", b)
		}
	})
	waitFor(t, 20*time.Second, "operator token file", func() bool {
		b, err := os.ReadFile(tokFile)
		s.opToken = strings.TrimSpace(string(b))
		return err == nil && s.opToken != ""
	})
	s.op = s.clients(t, s.opToken)
	waitFor(t, 20*time.Second, "server answering", func() bool {
		_, err := s.op.registry.ListGroups(context.Background(), &guardv1.ListGroupsRequest{})
		return err == nil
	})
	pool, err := pgxpool.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s.pool = pool
	tok, err := s.op.registry.CreateToken(context.Background(), &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: "r1", RunnerId: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	s.runner = s.clients(t, tok.GetSecret())
	return s
}

func (s *server) clients(t testing.TB, token string) clients {
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return clients{guardv1.NewGuardClient(conn), guardv1.NewApprovalsClient(conn), guardv1.NewRegistryClient(conn)}
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

func (s *server) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond until it holds or d passes (a condition, never a
// fixed sleep).
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
