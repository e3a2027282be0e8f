// Package app wires the server: store, services, interceptors, health,
// reflection, metrics, and the lifecycle (serve until the context ends, then
// NOT_SERVING, GracefulStop with a deadline, Stop, close the pool).
//
// buildServices (services.go) builds the domains in dependency order, top to
// bottom (approvals → chat outbox → decision export → guard → inbound →
// registry → resources → models → retention), one wire_*.go step per domain,
// each adding its service to Parts (parts.go: the base New makes plus every
// domain; only app and tests through Server.Deps see all of it), then the
// replica's listener with each domain's NOTIFY handler, then each gRPC
// service is handed its own deps. The domains' catalog entries
// (BuildCatalog) and apply steps (Appliers, handed to the registry, which
// refuses one without a catalog entry) are listed explicitly, no init()
// registration. The interceptor chain: request id, version header, audit of
// refused calls, metrics, logging, edgeErrors (every error through
// api.Status), auth. /healthz and /readyz sit next to /metrics;
// watchDatabase (database.go) makes health follow the schema every 2 s,
// telling an unreachable database ("database unreachable") from a schema
// behind, and every 10 s puts the replication state in the
// clawguard_database_* gauges, /readyz?verbose and a warning when
// acknowledged commits could be lost in a failover.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/clawguard/clawguard/migrations"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/proto/tlsfiles"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
	"github.com/clawguard/clawguard/server/internal/store"
)

// streamWorkers is the size of the gRPC server's stream worker pool.
const streamWorkers = 512

// The HTTP/2 flow-control windows of every connection (and its clients':
// the runner and ncl dial with the same): fixed, see grpc.InitialWindowSize.
const (
	StreamWindow = 1 << 20
	ConnWindow   = 8 << 20
)

// Server is a running control-plane replica.
type Server struct {
	cfg        config.Config
	log        *slog.Logger
	deps       *Parts
	grpc       *grpc.Server
	health     *health.Server
	guardAPI   *api.GuardService
	metricsReg interface{ Unregister() }
	lis        net.Listener
	metricsLis net.Listener
	consoleLis net.Listener
	db         *dbState // what watchDatabase last found, for /readyz
	drain      *drain   // ends the long-lived streams on stop
	background []func(ctx context.Context) error
	shutdown   []func()
}

// Addr is the gRPC listen address (useful with port 0 in tests).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// MetricsAddr is the metrics listen address ("" when off).
func (s *Server) MetricsAddr() string {
	if s.metricsLis == nil {
		return ""
	}
	return s.metricsLis.Addr().String()
}

// ConsoleAddr is the console's listen address ("" when off).
func (s *Server) ConsoleAddr() string {
	if s.consoleLis == nil {
		return ""
	}
	return s.consoleLis.Addr().String()
}

// Deps exposes the parts the replica was built from (tests).
func (s *Server) Deps() *Parts { return s.deps }

// GuardAPI is the replica's Guard service (tests swap its admission limiter).
func (s *Server) GuardAPI() *api.GuardService { return s.guardAPI }

// New opens the database, checks (or applies) the schema, binds the
// listeners and registers every service. Errors are one clear line.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	tracing, err := telemetry.Setup(ctx, telemetry.Options{Service: "clawguard-server", Version: Version, Instance: instanceID(cfg.Listen), Endpoint: cfg.OTLPEndpoint})
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, cfg, tracing)
	if err != nil {
		_ = tracing.ShutdownWithin(time.Second)
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			st.Close()
			_ = tracing.ShutdownWithin(time.Second)
		}
	}()
	if err := prepareSchema(ctx, st.Pool, cfg, log); err != nil {
		return nil, err
	}

	lis, metricsLis, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			lis.Close()
			if metricsLis != nil {
				metricsLis.Close()
			}
		}
	}()

	reg := metrics.NewRegistry()
	m := metrics.NewMetrics(reg)
	metrics.RegisterBuildInfo(reg, Version)
	grpcMetrics := metrics.NewGRPCServerMetrics(reg)
	d := &Parts{
		Store:   st,
		Metrics: m,
		Pools:   metrics.NewPools(reg),
		Log:     log,
		Config:  cfg,
		Auth:    authn.NewAuthenticator(st.Pool),
		Tracing: tracing,
	}
	d.Pools.Add("main", st.Pool)
	s := &Server{cfg: cfg, log: log, deps: d, lis: lis, metricsLis: metricsLis, health: health.NewServer(), db: &dbState{}, drain: newDrain()}
	if d.Validator, err = edge.New(rpcdecl.RequestTypes(rpcdecl.Services...)...); err != nil {
		return nil, fmt.Errorf("refusing to start: %w", err)
	}

	services, err := buildServices(ctx, d)
	if err != nil {
		return nil, err
	}
	if err := s.newGRPC(d, grpcMetrics, services); err != nil {
		return nil, err
	}
	s.background = services.background
	// Run ends in reverse: the pool closes, then the last spans are flushed.
	s.shutdown = append([]func(){func() {
		if err := tracing.ShutdownWithin(5 * time.Second); err != nil {
			log.Warn("flushing traces failed", "err", err)
		}
	}}, append(services.shutdown, st.Close)...)
	if err := s.listenConsole(services); err != nil {
		return nil, err
	}
	if metricsLis != nil {
		s.background = append(s.background, metricsServer(metricsLis, reg, cfg.Pprof, s.health, s.db))
	}
	ok = true
	return s, nil
}

// openStore opens the pool; with tracing on, statements are spans inside a
// traced call (otelpgx starts none without a recording parent: background
// loops stay quiet).
func openStore(ctx context.Context, cfg config.Config, tracing *telemetry.Tracing) (*store.Store, error) {
	var dbTracer pgx.QueryTracer
	if tracing.Enabled() {
		dbTracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tracing.Provider()), otelpgx.WithTrimSQLInSpanName())
	}
	return store.Open(ctx, cfg.DatabaseURL, cfg.MaxConns, store.WithQueryTracer(dbTracer))
}

// listen opens the gRPC listener and, when one is configured, the metrics
// listener.
func listen(cfg config.Config) (lis, metricsLis net.Listener, err error) {
	if lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.Listen, errors.Unwrap(err))
	}
	if cfg.MetricsListen != "" {
		if metricsLis, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			lis.Close()
			return nil, nil, fmt.Errorf("listen on %s (metrics): %w", cfg.MetricsListen, errors.Unwrap(err))
		}
	}
	return lis, metricsLis, nil
}

// newGRPC builds the gRPC server: the interceptor chain and options, the
// services, health and reflection; it refuses to start when a method lacks
// its rule (declaration is registration: it would be unguarded).
func (s *Server) newGRPC(d *Parts, grpcMetrics *grpcprom.ServerMetrics, services *services) error {
	chain := buildChain(d, grpcMetrics, services.guard.AdmitUnary, services.chain)
	// Outermost: a drained stream's status is final.
	chain.Stream = append([]grpc.StreamServerInterceptor{s.drain.stream}, chain.Stream...)
	opts := append(serverOptions(chain, services.guard), keepaliveOptions(s.cfg.ConnectionMaxAge)...)
	// A span per call (and per stream) when tracing is on; none when off.
	opts = append(opts, d.Tracing.ServerOptions()...)
	if s.cfg.TLSCert != "" {
		creds, err := serverTLS(s.cfg)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	s.grpc = grpc.NewServer(opts...)
	s.guardAPI = services.guard
	guardv1.RegisterGuardServer(s.grpc, services.guard)
	guardv1.RegisterApprovalsServer(s.grpc, services.approvals)
	guardv1.RegisterRegistryServer(s.grpc, services.registry)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	grpcMetrics.InitializeMetrics(s.grpc)

	// Boot check: declaration is registration. A method without its rule
	// would be unguarded; refuse to start.
	if missing := rpcdecl.Check(s.grpc); len(missing) > 0 {
		return fmt.Errorf("refusing to start: RPCs without a (guard.v1.rule) declaration: %s", strings.Join(missing, "; "))
	}
	return nil
}

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	// NOT_SERVING until the schema is current (an older or unmigrated
	// database must not take traffic).
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	g.Go(func() error { return s.watchDatabase(gctx) })
	for _, fn := range s.background {
		g.Go(func() error { return fn(gctx) })
	}
	g.Go(func() error {
		if err := s.grpc.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		s.health.Shutdown()
		stopping := time.Now()
		done := make(chan struct{})
		// GOAWAY first (no new streams on this replica's connections), then
		// the long-lived streams told to move: GracefulStop waits only for
		// the unary calls in flight.
		go func() { s.grpc.GracefulStop(); close(done) }()
		s.drain.stop()
		defer func() { s.log.Info("stopped serving", "took", time.Since(stopping).Round(time.Millisecond)) }()
		select {
		case <-done:
		case <-time.After(s.cfg.ShutdownTimeout):
			s.log.Warn("graceful stop timed out; stopping", "timeout", s.cfg.ShutdownTimeout)
			s.grpc.Stop()
		}
		return nil
	})
	err := g.Wait()
	for i := len(s.shutdown) - 1; i >= 0; i-- {
		s.shutdown[i]()
	}
	return err
}

// instanceID names this replica in its spans (service.instance.id): the
// host and the gRPC listen address, so two replicas on one host differ.
func instanceID(listen string) string {
	host, _ := os.Hostname()
	return host + "/" + listen
}

func serverTLS(cfg config.Config) (credentials.TransportCredentials, error) {
	tc, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(tc), nil
}

// consoleTLS is the console's TLS: the gRPC listener's certificate (nil
// when it has none), without its client-certificate requirement — a
// browser signs in with its user's token — unless --console-client-ca asks
// for one.
func consoleTLS(cfg config.Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cfg.TLSClientCA = cfg.ConsoleClientCA
	return tlsConfig(cfg)
}

// tlsConfig is the listener's TLS, following its files: a certificate, key
// or client CA replaced on disk is used from the next handshake on, with no
// restart (tlsfiles). A replacement that does not load is logged and the
// last good one kept.
func tlsConfig(cfg config.Config) (*tls.Config, error) {
	src, err := tlsfiles.Load(tlsfiles.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSClientCA})
	if err != nil {
		return nil, fmt.Errorf("load TLS files: %w", err)
	}
	src.OnReloadError = func(err error) {
		slog.Warn("TLS files changed but do not load; serving the last good ones", "err", err)
	}
	return src.ServerConfig(), nil
}

// prepareSchema applies the migrations with --auto-migrate and registers
// the operator token once the schema is current (now, or when
// watchDatabase sees it become so); the token's file exists from the
// first start.
func prepareSchema(ctx context.Context, pool *pgxpool.Pool, cfg config.Config, log *slog.Logger) error {
	if cfg.AutoMigrate {
		res, err := migrations.Apply(ctx, pool, 0)
		if err != nil {
			return fmt.Errorf("auto-migrate: %w", err)
		}
		if len(res.Applied) > 0 {
			log.Info("schema migrated", "from", res.From, "to", res.To)
		}
	}
	if cfg.OperatorTokenFile != "" {
		// The file exists from the first start; the token is registered once
		// the schema is current (now, or when watchDatabase sees it become so).
		if _, err := authn.ReadOrCreateSecret(cfg.OperatorTokenFile); err != nil {
			return err
		}
		if current, err := migrations.Current(ctx, pool); err == nil && current {
			if err := authn.EnsureOperatorToken(ctx, pool, cfg.OperatorTokenFile); err != nil {
				return err
			}
		}
	}
	return nil
}

// serverOptions are the gRPC server's options: the interceptor chain, the
// message size bound, the stream workers and windows, and the admission tap.
func serverOptions(chain Chain, guardAPI *api.GuardService) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(chain.Unary...),
		grpc.ChainStreamInterceptor(chain.Stream...),
		grpc.MaxRecvMsgSize(1 << 20),
		// A pool of long-lived goroutines serves new streams (every unary
		// call is one), so a Guard.Decide does not start a goroutine and
		// regrow its stack each time (at 512 calls in flight, the old 64
		// left 7 of 8 calls to fresh goroutines: stack copying was a tenth
		// of the server's CPU). Sized for the calls in flight (they wait on
		// Postgres), not the cores; beyond it gRPC spawns as before.
		grpc.NumStreamWorkers(streamWorkers),
		// Static flow-control windows: with gRPC's default (a 64 KiB window
		// grown by BDP estimation) every burst of requests also costs PING
		// and WINDOW_UPDATE frames — a write, and a wake-up of the peer,
		// each; on the VMs measured a context switch costs more than a
		// decision. Messages are small (MaxRecvMsgSize bounds them), so a
		// fixed window never limits throughput.
		grpc.InitialWindowSize(StreamWindow),
		grpc.InitialConnWindowSize(ConnWindow),
		// Past the admission limit a Guard.Decide is refused as the
		// transport reads its headers (api.GuardService.TapOverload).
		grpc.InTapHandle(guardAPI.TapOverload),
	}
}

// metricsServer serves /metrics, the probes and (with --pprof) pprof on
// the metrics listener until its context ends.
func metricsServer(lis net.Listener, reg *prometheus.Registry, withPprof bool, hs *health.Server, db *dbState) func(context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(reg))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	probes(mux, hs, db)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return func(ctx context.Context) error {
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics server: %w", err)
		}
		return nil
	}
}
