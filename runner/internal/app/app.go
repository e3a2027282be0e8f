// Package app wires the runner: the server connection, the runtime, the
// delivery-action registry and engine, the DecideStream and Connect
// streams, the sessions and their gateways, and the metrics endpoint.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/proto/tlsfiles"
	"github.com/clawguard/clawguard/runner/internal/config"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/decide"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/handlers"
	"github.com/clawguard/clawguard/runner/internal/lease"
	"github.com/clawguard/clawguard/runner/internal/mcphost"
	"github.com/clawguard/clawguard/runner/internal/mcptools"
	"github.com/clawguard/clawguard/runner/internal/metrics"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
	"github.com/clawguard/clawguard/runner/internal/runtime/process"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// Version is reported at registration.
var Version = "dev"

// Runner is a wired runner.
type Runner struct {
	Config   config.Config
	Log      *slog.Logger
	Conn     *grpc.ClientConn
	Runtime  rt.Runtime
	Actions  *delivery.Registry
	Engine   *delivery.Engine
	Decide   *decide.Client
	Sessions *sessions.Manager
	MCP      *mcphost.Host
	Tools    *mcptools.Tools
	Metrics  *metrics.Metrics
	registry *metricsRegistry
	regCli   guardv1.RegistryClient
	applied  *connect.Applied
	connect  *connect.Client
	// lease fences the runner when it cannot renew its lease in time.
	lease *lease.Tracker
	// holdsDone remembers what replayed holds did outside the database.
	holdsDone *connect.Applied

	tracing    *telemetry.Tracing // OpenTelemetry (off: the no-op provider)
	heartbeat  time.Duration
	instanceID string // random per process: the lease is this process's
	upMu       sync.Mutex
	up         [2]bool // decide, connect
}

// New builds a runner (nothing is started).
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Runner, error) {
	token, err := cfg.Token()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	cfg.DataDir = dataDir
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	creds, secure, err := transportCredentials(cfg)
	if err != nil {
		return nil, err
	}
	tracing, err := telemetry.Setup(ctx, telemetry.Options{Service: "clawguard-runner", Version: Version, Instance: cfg.ID, Endpoint: cfg.OTLPEndpoint})
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(cfg.Server, append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{token: token, secure: secure}),
		// Fixed flow-control windows, as the server's: no BDP pings and
		// window updates (a write and a wake-up each) on the decision stream.
		grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(8 << 20)},
		tracing.DialOptions()...)...)
	if err != nil {
		_ = tracing.ShutdownWithin(time.Second)
		return nil, fmt.Errorf("--server: %w", err)
	}

	r := &Runner{Config: cfg, Log: log, Conn: conn, regCli: guardv1.NewRegistryClient(conn), instanceID: newInstanceID(), tracing: tracing}
	reg := newMetricsRegistry()
	r.registry = reg
	r.Metrics = metrics.NewMetrics(reg.Registry)
	metrics.RegisterBuildInfo(reg.Registry, Version)

	switch cfg.Runtime {
	case "docker":
		d, err := docker.New(ctx, docker.Config{InstallID: cfg.ID, BuildNetwork: cfg.BuildNetwork, MCPNetwork: cfg.MCPNetwork, Logger: log})
		if err != nil {
			conn.Close()
			return nil, err
		}
		r.Runtime = d
	default:
		r.Runtime = process.New(process.Config{InstallID: cfg.ID, Logger: log})
	}

	r.Actions = delivery.NewRegistry(log)
	r.Decide = decide.New(guardv1.NewGuardClient(conn), log)
	r.Decide.OnConnected = func(up bool) { r.setUp(0, up) }
	r.Decide.OnReconnect = r.Metrics.StreamReconnectsTotal.Inc
	r.Engine = &delivery.Engine{Registry: r.Actions, Decider: r.Decide, Metrics: r.Metrics, Log: log, DecideWait: cfg.DecideWait}
	if tracing.Enabled() {
		r.Engine.Tracer = tracing.Tracer()
	}
	base := cfg.AgentImage
	if cfg.Runtime == "process" {
		base = cfg.AgentBinary
	}
	launcher, ok := r.Runtime.(rt.MCPLauncher)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("runtime %s cannot host MCP servers", r.Runtime.Name())
	}
	r.MCP = mcphost.New(mcphost.Config{Launcher: launcher, DataDir: filepath.Join(dataDir, "mcp"), Log: log,
		OnToolsChanged: r.toolsChanged})
	r.Tools = mcptools.New(mcptools.Deps{Host: r.MCP, Registry: r.regCli, Deliver: r.deliverDurable, Claim: r.instanceID, Log: log,
		Image: func(g *guardv1.Group) string {
			if g.GetBaseImage() != "" {
				return g.GetBaseImage()
			}
			return cfg.AgentImage
		}})
	r.Sessions = sessions.New(sessions.Config{
		DataDir: dataDir, Runtime: r.Runtime, AgentBase: base, AgentEnv: cfg.AgentEnv,
		DefaultCPUs: cfg.ContainerCPUs, DefaultMemory: cfg.ContainerMemory,
		Conn: conn, Engine: r.Engine, Metrics: r.Metrics, Log: log, AckDeadline: cfg.InboxAckDeadline,
		Gateway: gateway.Options{Known: func(a string) bool { _, ok := r.Actions.Get(a); return ok }, Actions: r.Actions.Specs, Tools: r.Tools.List,
			ServerOptions: tracing.ServerOptions()},
		OnGroup: r.Tools.Sync,
	})
	r.Engine.Notifier = r.Sessions
	r.lease = lease.New(log)
	r.lease.OnLost = func(ctx context.Context, killBy time.Time) {
		n := r.Sessions.Fence(ctx, killBy)
		log.Error("fenced: agents stopped until the lease is renewed", "stopped", n)
	}
	r.lease.OnRegained = r.Sessions.Unfence
	r.holdsDone, err = connect.OpenApplied(filepath.Join(dataDir, "holds-applied.log"), 0)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := handlers.Register(r.Actions, handlers.Deps{Conn: conn, Restart: r.Sessions.RestartSession, OnWake: r.Sessions.OnWake,
		Done: r.holdsDone, Log: log}); err != nil {
		conn.Close()
		return nil, err
	}
	if err := r.Actions.Register(r.Tools.Action()); err != nil {
		conn.Close()
		return nil, err
	}
	r.Metrics.PreInit(r.Actions.Names())
	return r, nil
}

// toolsChanged tells the group's sessions here that their MCP tools changed.
func (r *Runner) toolsChanged(group string) {
	for _, s := range r.Sessions.List() {
		if s.GroupID == group {
			r.Sessions.Notify(s.ID, &agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_TOOLS_CHANGED,
				Text: "Your MCP tools changed: list them again.", At: timestamppb.Now()})
		}
	}
}

// deliverDurable puts an item into a session's durable inbox (synced before
// it returns; an id seen before is not added again).
func (r *Runner) deliverDurable(ds delivery.Session, id string, n *agentv1.Notice) error {
	s, err := r.Sessions.Ensure(ds.ID, ds.GroupID)
	if err != nil {
		return err
	}
	return s.Inbox.Durable(id, &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}})
}

// ready: both streams (DecideStream, Connect) are up.
func (r *Runner) ready() bool {
	r.upMu.Lock()
	defer r.upMu.Unlock()
	return r.up[0] && r.up[1]
}

func (r *Runner) setUp(i int, up bool) {
	r.upMu.Lock()
	defer r.upMu.Unlock()
	r.up[i] = up
	r.Metrics.SetStreamConnected(r.up[0] && r.up[1])
}

// ConformanceError is a refused registration: the server found delivery
// actions that would run without a guard decision.
type ConformanceError struct {
	Violations []string
	Exempt     []string
	Message    string
}

func (e *ConformanceError) Error() string {
	return "guard conformance failure: " + strings.Join(e.Violations, "; ")
}

// Banner is what the runner prints before exiting 1 on a conformance failure.
func (e *ConformanceError) Banner() string {
	line := strings.Repeat("=", 64)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\nclawguard-runner stopped: guard conformance failure\n%s\n", line, line)
	b.WriteString("The server refused this runner's delivery actions: a privileged action\n")
	b.WriteString("is not mapped to the guard catalog — it would run with no allow/hold/deny\n")
	b.WriteString("decision.\n\n")
	for _, v := range e.Violations {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	if len(e.Violations) == 0 {
		fmt.Fprintf(&b, "  - %s\n", e.Message)
	}
	b.WriteString("\nFix the registration (map the action to its catalog entry). Only the\n")
	b.WriteString("server's declared exemption list may run unmapped")
	if len(e.Exempt) > 0 {
		b.WriteString(": " + strings.Join(e.Exempt, ", "))
	}
	fmt.Fprintf(&b, ".\n%s\n", line)
	return b.String()
}

// Register sends the manifest derived from the action registry. A
// FailedPrecondition is a *ConformanceError, a refused token or request
// final; anything else (an unreachable or failing server, a lease still
// held by an earlier process) is retried with back-off, 200 ms doubling to
// 5 s (jittered), until ctx ends; each attempt is bounded, so a server
// that hangs is asked again. A registration renews the lease: its
// send time is the lease's (the fence counts from it).
func (r *Runner) Register(ctx context.Context) error {
	host := r.Config.Host
	caps := []string{r.Runtime.Name()}
	if r.Runtime.Name() == "docker" {
		caps = append(caps, "image-build")
	}
	req := &guardv1.RegisterRunnerRequest{
		RunnerId: r.Config.ID, Host: host, Version: Version, Capabilities: caps,
		DeliveryActions: r.Actions.Manifest(), InstanceId: r.instanceID,
	}
	var sent time.Time
	resp, err := backoff.Retry(ctx, func() (*guardv1.RegisterRunnerResponse, error) {
		sent = time.Now()
		actx, cancel := context.WithTimeout(ctx, registerTimeout)
		resp, err := r.regCli.RegisterRunner(actx, req)
		cancel()
		st := status.Convert(err)
		switch st.Code() {
		case codes.OK:
			return resp, nil
		case codes.FailedPrecondition:
			ce := &ConformanceError{Message: st.Message()}
			for _, d := range st.Details() {
				if v, ok := d.(*guardv1.ConformanceViolations); ok {
					ce.Violations = append(ce.Violations, v.GetViolations()...)
				}
			}
			return nil, backoff.Permanent(ce)
		case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument, codes.Unimplemented:
			// This runner's token or request is wrong: asking again changes nothing.
			return nil, backoff.Permanent(fmt.Errorf("register runner: %w", err))
		default:
			// The server or its database failing (Unavailable, Internal,
			// Unknown, a deadline), or an earlier process's lease
			// (AlreadyExists): a runner that stopped here would leave its
			// sessions' deliveries waiting, so it keeps asking.
			return nil, err
		}
	},
		backoff.WithBackOff(retry.Exponential(200*time.Millisecond, 5*time.Second)),
		backoff.WithMaxElapsedTime(0), // until ctx ends
		backoff.WithNotify(func(err error, d time.Duration) {
			if status.Code(err) == codes.AlreadyExists {
				// An earlier process of this runner still holds the lease; it
				// expires without heartbeats, then this process takes over.
				r.Log.Warn("runner id held by another live process; waiting for its lease", "err", err)
				return
			}
			r.Log.Warn(registrationRetry(err), "err", err, "backoff", d)
		}))
	if err != nil {
		return err
	}
	r.heartbeat = resp.GetHeartbeatInterval().AsDuration()
	ttl := resp.GetLeaseTtl().AsDuration()
	if ttl <= 0 {
		ttl = 3 * r.heartbeat // a server that does not say: its default relation
	}
	r.lease.Renewed(sent, ttl)
	// The server places sessions by this identity (the token's host and
	// labels, narrowed by --host): say which it is.
	r.Log.Info("registered", "host", resp.GetHost(), "labels", resp.GetLabels())
	return nil
}

// registerTimeout bounds one registration attempt.
const registerTimeout = 10 * time.Second

// registrationRetry says why a registration is tried again, as what it was.
func registrationRetry(err error) string {
	switch status.Code(err) {
	case codes.Unavailable:
		return "server (or its database) unavailable; retrying registration"
	case codes.DeadlineExceeded:
		return "no answer to the registration in time; retrying it"
	case codes.ResourceExhausted:
		return "server overloaded; retrying registration"
	case codes.Internal, codes.Unknown:
		return "server failed to register this runner; retrying registration"
	default:
		return "registration not accepted yet; retrying it"
	}
}

// Run registers, cleans up orphans, opens the configured sessions and
// serves until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	defer func() { // last: the spans of the shutdown included
		if err := r.tracing.ShutdownWithin(5 * time.Second); err != nil {
			r.Log.Warn("flushing traces failed", "err", err)
		}
	}()
	defer r.Conn.Close()
	defer r.holdsDone.Close()
	if err := r.Register(ctx); err != nil {
		return err
	}
	if n, err := r.Runtime.RemoveOrphans(ctx); err != nil {
		return fmt.Errorf("remove orphans: %w", err)
	} else if n > 0 {
		r.Log.Info("removed orphan agents of an earlier run", "count", n)
	}
	applied, err := connect.OpenApplied(filepath.Join(r.Config.DataDir, "pushes-applied.log"), 0)
	if err != nil {
		return err
	}
	defer applied.Close()
	r.applied = applied

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The Connect stream outlives ctx by a moment: a clean stop releases the
	// lease on it before it closes.
	cctx, ccancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ccancel()
	done := make(chan struct{}, 4)
	go func() { r.Decide.Run(ctx); done <- struct{}{} }()
	r.connect = &connect.Client{
		Registry: r.regCli, RunnerID: r.Config.ID, InstanceID: r.instanceID, Applied: applied, Applier: r.Sessions,
		Heartbeat: r.heartbeat, Log: r.Log,
		OnConnected: func(up bool) { r.setUp(1, up) },
		OnReconnect: r.Metrics.StreamReconnectsTotal.Inc,
		OnApplied:   r.Metrics.PushesAppliedTotal.Inc,
		OnRenewed:   r.lease.Renewed,
	}
	go r.lease.Run(ctx)
	first := true
	var fatal error // a refused re-registration stops the runner with it
	r.connect.BeforeConnect = func(ctx context.Context) error {
		if first {
			first = false
			return nil
		}
		var ce *ConformanceError
		if err := r.Register(ctx); errors.As(err, &ce) {
			r.Log.Error("re-registration refused", "err", err)
			fatal = err
			cancel()
			return err
		} else if err != nil {
			return err
		}
		r.Sessions.Reconcile(ctx) // sessions moved away while the lease was lost
		return nil
	}
	connDone := make(chan struct{})
	go func() { r.connect.Run(cctx); close(connDone) }()
	go func() {
		r.Sessions.IdleLoop(ctx, r.Config.IdleAfter, min(r.Config.IdleAfter/4+time.Second, time.Minute))
		done <- struct{}{}
	}()
	go r.MCP.IdleLoop(ctx, time.Minute)
	go r.Sessions.LivenessLoop(ctx, min(r.Config.InboxAckDeadline/4+100*time.Millisecond, 30*time.Second))

	if r.Config.MetricsListen != "" {
		ln, err := net.Listen("tcp", r.Config.MetricsListen)
		if err != nil {
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		srv := &http.Server{Handler: metricsMux(r.registry, r.ready), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		r.Log.Info("metrics listening", "addr", ln.Addr().String())
	}

	// Sessions whose durable inbox still holds items from before a restart.
	r.Sessions.Resume(ctx)
	for _, g := range r.Config.Groups {
		if _, err := r.OpenSession(ctx, g); err != nil {
			r.Log.Error("could not open a session for the group", "group", g, "err", err)
		}
	}
	r.Log.Info("runner started", "id", r.Config.ID, "runtime", r.Runtime.Name(), "server", r.Config.Server,
		"actions", r.Actions.Names())
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	r.Sessions.Shutdown(sctx)
	r.MCP.Close()
	if fatal == nil {
		// A clean stop: give the lease up so this id can start again at once.
		rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := r.connect.Release(rctx); err != nil {
			r.Log.Warn("lease not released; a restart waits for it to expire", "err", err)
		} else {
			r.Log.Info("lease released")
		}
		rcancel()
	}
	ccancel()
	<-connDone
	return fatal
}

// OpenSession opens (or gets) the group's session on this runner and starts its agent.
func (r *Runner) OpenSession(ctx context.Context, group string) (*sessions.Session, error) {
	resp, err := r.regCli.OpenSession(ctx, &guardv1.OpenSessionRequest{AgentGroupId: group})
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	return r.Sessions.Open(ctx, resp.GetSession(), resp.GetGroup())
}

// bearer sends the runner token on every call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}
func (b bearer) RequireTransportSecurity() bool { return b.secure }

func newInstanceID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "inst_" + hex.EncodeToString(b)
}

// transportCredentials is plaintext without --tls-ca; with it, TLS verified
// against that CA, presenting --tls-cert to a server that requires client
// certificates (mTLS). Both follow their files: a CA bundle or certificate
// replaced on disk is used from the next connection on, with no restart.
func transportCredentials(cfg config.Config) (credentials.TransportCredentials, bool, error) {
	if cfg.TLSCA == "" {
		return insecure.NewCredentials(), false, nil
	}
	src, err := tlsfiles.Load(tlsfiles.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSCA})
	if err != nil {
		return nil, false, fmt.Errorf("--tls-ca/--tls-cert/--tls-key: %w", err)
	}
	src.OnReloadError = func(err error) {
		slog.Warn("TLS files changed but do not load; using the last good ones", "err", err)
	}
	return src.ClientCredentials(cfg.TLSServerName), true, nil
}
