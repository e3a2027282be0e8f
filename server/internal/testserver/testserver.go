// Package testserver starts a real server (app.New) on loopback against a
// fresh Postgres database, for gRPC service tests, and mints tokens for every
// principal kind. Packages using it need TestMain: os.Exit(pgtest.Main(m)).
package testserver

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawguard/clawguard/server/internal/resources"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/logs"
)

// Server is a running replica plus helpers.
type Server struct {
	*app.Server
	URL           string // database URL
	Pool          *pgxpool.Pool
	OperatorToken string
	cancel        context.CancelFunc
	done          chan error
}

// Option tweaks the config before start.
type Option func(*config.Config)

// Start runs a replica on a fresh migrated database.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return StartOn(t, pgtest.NewDB(t), opts...)
}

// StartOn runs a replica on an existing database (a second replica: pass
// the first one's URL).
func StartOn(t testing.TB, dbURL string, opts ...Option) *Server {
	t.Helper()
	return startOn(t, dbURL, nil, nil, opts...)
}

// StartTuned runs a replica on a fresh database after tune has adjusted its
// services' timings (between app.New and Run: e.g. a long poll fallback,
// so a test proves the NOTIFY path).
func StartTuned(t testing.TB, tune func(*app.Parts), opts ...Option) *Server {
	t.Helper()
	return startOn(t, pgtest.NewDB(t), nil, tune, opts...)
}

// StartLogged runs a replica on a fresh database whose log is the server's
// own (logs.New: JSON, info) written to w, for tests of what it logs.
func StartLogged(t testing.TB, w io.Writer, opts ...Option) *Server {
	t.Helper()
	return startOn(t, pgtest.NewDB(t), logs.New(w, slog.LevelInfo), nil, opts...)
}

func startOn(t testing.TB, dbURL string, log *slog.Logger, tune func(*app.Parts), opts ...Option) *Server {
	t.Helper()
	cfg := config.Default()
	cfg.DatabaseURL = dbURL
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.OperatorTokenFile = operatorTokenFile(t, dbURL)
	for _, o := range opts {
		o(&cfg)
	}
	level := slog.LevelError
	if os.Getenv("CLAWGUARD_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	var out io.Writer = io.Discard
	if level == slog.LevelDebug {
		out = os.Stderr
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))
	}
	srv, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Server: srv, URL: dbURL, Pool: srv.Deps().Store.Pool, cancel: cancel, done: make(chan error, 1)}
	tok, err := os.ReadFile(cfg.OperatorTokenFile)
	if err != nil {
		t.Fatalf("testserver: operator token: %v", err)
	}
	s.OperatorToken = strings.TrimSpace(string(tok))
	if tune != nil {
		tune(srv.Deps())
	}
	go func() { s.done <- srv.Run(ctx) }()
	t.Cleanup(s.Stop)
	return s
}

// operatorTokenFiles maps a database URL to the operator token file of its
// replicas. Replicas of one deployment share one file, as they do in
// production: the file's token is registered under one id, so a replica
// with a file of its own would replace the others' token (and they would
// put theirs back on their next health flip), failing calls at random.
var operatorTokenFiles sync.Map

func operatorTokenFile(t testing.TB, dbURL string) string {
	f, loaded := operatorTokenFiles.LoadOrStore(dbURL, filepath.Join(t.TempDir(), "operator.token"))
	if !loaded {
		t.Cleanup(func() { operatorTokenFiles.Delete(dbURL) })
	}
	return f.(string)
}

// Stop stops the replica (idempotent); tests use it to kill one replica.
func (s *Server) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.cancel = nil
}

// Deps exposes the replica's dependencies.
func (s *Server) Deps() *app.Parts { return s.Server.Deps() }

// Token mints a token of the given kind ("runner" needs runnerID, "user" needs userID).
func (s *Server) Token(t testing.TB, kind, runnerID, userID string) string {
	t.Helper()
	return s.storeToken(t, authn.NewToken{Kind: kind, RunnerID: runnerID, UserID: userID})
}

// RunnerToken mints a runner token bound to a host and labels, as
// "ncl tokens create --kind runner --runner R --host H --label k=v" does
// (no host and no labels: an unbound token, unpinned groups only).
func (s *Server) RunnerToken(t testing.TB, runnerID, host string, labels map[string]string) string {
	t.Helper()
	return s.storeToken(t, authn.NewToken{Kind: "runner", RunnerID: runnerID, Host: host, Labels: labels})
}

// BridgeToken mints a bridge token for its channel namespaces, as
// "ncl tokens create --kind bridge --channel telegram" does. Without
// channels it is a token minted before bindings existed: it asserts nobody.
func (s *Server) BridgeToken(t testing.TB, channels ...string) string {
	t.Helper()
	return s.storeToken(t, authn.NewToken{Kind: "bridge", Channels: channels})
}

// storeToken stores nt with a fresh secret (its user made first) and
// returns the secret.
func (s *Server) storeToken(t testing.TB, nt authn.NewToken) string {
	t.Helper()
	ctx := context.Background()
	secret, err := authn.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if nt.UserID != "" {
		if err := resources.EnsureUser(ctx, s.Pool, nt.UserID, ""); err != nil {
			t.Fatal(err)
		}
	}
	nt.Secret, nt.Name = secret, "test "+nt.Kind
	if _, err := authn.StoreToken(ctx, s.Pool, nt); err != nil {
		t.Fatal(err)
	}
	return secret
}

// Conn dials the replica with a bearer token (and, for runners acting for
// an agent, a session header).
func (s *Server) Conn(t testing.TB, token string, session string) *grpc.ClientConn {
	t.Helper()
	return Dial(t, s.Addr(), token, session)
}

// Dial connects to addr with per-call bearer credentials.
func Dial(t testing.TB, addr, token, session string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer{token: token, session: session}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Clients bundles the three service clients.
type Clients struct {
	Guard     guardv1.GuardClient
	Approvals guardv1.ApprovalsClient
	Registry  guardv1.RegistryClient
}

// ClientsFor returns the clients over conn.
func ClientsFor(conn *grpc.ClientConn) Clients {
	return Clients{
		Guard:     guardv1.NewGuardClient(conn),
		Approvals: guardv1.NewApprovalsClient(conn),
		Registry:  guardv1.NewRegistryClient(conn),
	}
}

// Operator returns clients authenticated as the operator.
func (s *Server) Operator(t testing.TB) Clients {
	return ClientsFor(s.Conn(t, s.OperatorToken, ""))
}

type bearer struct{ token, session string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	md := map[string]string{"authorization": "Bearer " + b.token}
	if b.session != "" {
		md[authn.SessionHeader] = b.session
	}
	return md, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Eventually polls cond until it holds, failing the test with what after
// timeout. Tests wait on conditions, never on fixed sleeps.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
