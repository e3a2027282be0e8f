// Package app wires the runner: the server connection, the runtime, the
// delivery-action registry and engine, the DecideStream and Connect
// streams, the sessions and their gateways, and the metrics endpoint.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/proto/failover"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/runner/internal/config"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/decide"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/handlers"
	"github.com/clawguard/clawguard/runner/internal/lease"
	"github.com/clawguard/clawguard/runner/internal/mcphost"
	"github.com/clawguard/clawguard/runner/internal/mcptools"
	"github.com/clawguard/clawguard/runner/internal/metrics"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
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
	book     *failover.Book // the server's replicas: which to avoid
	Runtime  rt.Runtime
	Actions  *delivery.Registry
	Engine   *delivery.Engine
	Decide   *decide.Client
	Sessions *sessions.Manager
	MCP      *mcphost.Host
	Tools    *mcptools.Tools
	Egress   *egress.Proxy    // every session's way out
	Models   *modelgw.Gateway // every session's model calls, on its egress socket
	Metrics  *metrics.Metrics
	registry *metricsRegistry
	regCli   guardv1.RegistryClient
	// egressPolicy is what no agent reaches; sessions add their listeners.
	egressPolicy *egress.AddressPolicy
	applied      *connect.Applied
	connect      *connect.Client
	// lease fences the runner when it cannot renew its lease in time.
	lease *lease.Tracker
	// holdsDone remembers what replayed holds did outside the database.
	holdsDone *connect.Applied

	tracing    *telemetry.Tracing // OpenTelemetry (off: the no-op provider)
	heartbeat  time.Duration
	instanceID string // random per process: the lease is this process's
	upMu       sync.Mutex
	rd         readiness // what /readyz says (under upMu)
}

// New builds a runner (nothing is started).
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *Runner, err error) {
	token, err := cfg.Token()
	if err != nil {
		return nil, err
	}
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	tracing, err := telemetry.Setup(ctx, telemetry.Options{Service: "clawguard-runner", Version: Version, Instance: cfg.ID, Endpoint: cfg.OTLPEndpoint})
	if err != nil {
		return nil, err
	}
	conn, book, err := dial(cfg, token, tracing, log)
	if err != nil {
		_ = tracing.ShutdownWithin(time.Second)
		return nil, err
	}
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	r := &Runner{Config: cfg, Log: log, Conn: conn, book: book, regCli: guardv1.NewRegistryClient(conn), instanceID: newInstanceID(), tracing: tracing}
	r.registry = newMetricsRegistry()
	r.Metrics = metrics.NewMetrics(r.registry.Registry)
	metrics.RegisterBuildInfo(r.registry.Registry, Version)
	if r.Runtime, err = newRuntime(ctx, cfg, log); err != nil {
		return nil, err
	}
	r.wireDelivery()
	if err := r.wireEgress(); err != nil {
		return nil, err
	}
	if err := r.wireMCP(); err != nil {
		return nil, err
	}
	r.wireSessions()
	if err := r.registerActions(); err != nil {
		return nil, err
	}
	r.Metrics.PreInit(r.Actions.Names())
	return r, nil
}

// newRuntime is the configured runtime (--runtime).
func newRuntime(ctx context.Context, cfg config.Config, log *slog.Logger) (rt.Runtime, error) {
	if cfg.Runtime == "docker" {
		tools, err := agentTools(cfg)
		if err != nil {
			return nil, err
		}
		return docker.New(ctx, docker.Config{InstallID: cfg.ID, BuildNetwork: cfg.BuildNetwork, MCPNetwork: cfg.MCPNetwork,
			HomeSize: cfg.Tools.HomeSize, Tools: tools, Logger: log})
	}
	return process.New(process.Config{InstallID: cfg.ID, Logger: log}), nil
}

// wireDelivery makes the path of every action: the registry, the
// DecideStream client and the engine between them.
func (r *Runner) wireDelivery() {
	r.Actions = delivery.NewRegistry(r.Log)
	r.Decide = decide.New(guardv1.NewGuardClient(r.Conn), r.Log)
	r.Decide.OnConnected = func(up bool) { r.setUp(0, up) }
	r.Decide.OnReconnect = r.Metrics.StreamReconnectsTotal.Inc
	r.Engine = &delivery.Engine{Registry: r.Actions, Decider: r.Decide, Applier: r.regCli, Metrics: r.Metrics, Log: r.Log, DecideWait: r.Config.DecideWait}
	if r.tracing.Enabled() {
		r.Engine.Tracer = r.tracing.Tracer()
	}
}

// wireMCP makes the host of the groups' guarded MCP servers and the
// agent's side of their tools.
func (r *Runner) wireMCP() error {
	launcher, ok := r.Runtime.(rt.MCPLauncher)
	if !ok {
		return fmt.Errorf("runtime %s cannot host MCP servers", r.Runtime.Name())
	}
	r.MCP = mcphost.New(mcphost.Config{Launcher: launcher, DataDir: filepath.Join(r.Config.DataDir, "mcp"), Log: r.Log,
		OnToolsChanged: r.toolsChanged})
	r.Tools = mcptools.New(mcptools.Deps{Host: r.MCP, Registry: r.regCli, Deliver: r.deliverDurable, Claim: r.instanceID, Log: r.Log,
		Image: func(g *guardv1.Group) string {
			if g.GetBaseImage() != "" {
				return g.GetBaseImage()
			}
			return r.Config.AgentImage
		}})
	return nil
}

// wireSessions makes the sessions (their endpoints, inboxes and agents)
// and the lease fence that stops them.
func (r *Runner) wireSessions() {
	cfg := r.Config
	base := cfg.AgentImage
	if cfg.Runtime == "process" {
		base = cfg.AgentBinary
	}
	r.Sessions = sessions.New(sessions.Config{
		DataDir: cfg.DataDir, Runtime: r.Runtime, AgentBase: base, AgentEnv: cfg.AgentEnv,
		DefaultCPUs: cfg.ContainerCPUs, DefaultMemory: cfg.ContainerMemory,
		Conn: r.Conn, Engine: r.Engine, Metrics: r.Metrics, Log: r.Log, AckDeadline: cfg.InboxAckDeadline,
		Gateway: gateway.Options{Known: func(a string) bool { _, ok := r.Actions.Get(a); return ok }, Actions: r.Actions.Specs, Tools: r.Tools.List,
			Limits: cfg.Gateway,
			Context: func(ctx context.Context, s delivery.Session) *agentv1.AgentContext {
				return r.Sessions.AgentContext(ctx, s)
			},
			OnRefused:     func(limit string) { r.Metrics.GatewayRefusalsTotal.WithLabelValues(limit).Inc() },
			ServerOptions: r.tracing.ServerOptions()},
		OnGroup:        r.Tools.Sync,
		OnToolsChanged: r.Tools.Forget,
		Egress:         r.Egress, EgressPolicy: r.egressPolicy, Models: r.Models,
	})
	r.Engine.Notifier = r.Sessions
	r.lease = lease.New(r.Log)
	r.lease.OnLost = func(ctx context.Context, killBy time.Time) {
		n := r.Sessions.Fence(ctx, killBy)
		r.Log.Error("fenced: agents stopped until the lease is renewed", "stopped", n)
	}
	r.lease.OnRegained = r.Sessions.Unfence
}

// registerActions registers the delivery actions: the handlers' and
// mcp_call.
func (r *Runner) registerActions() (err error) {
	r.holdsDone, err = connect.OpenApplied(filepath.Join(r.Config.DataDir, "holds-applied.log"), 0)
	if err != nil {
		return err
	}
	if err := handlers.Register(r.Actions, handlers.Deps{Conn: r.Conn, Restart: r.Sessions.RestartSession, OnWake: r.Sessions.OnWake,
		Done: r.holdsDone, Destination: r.Sessions.Destination, Log: r.Log}); err != nil {
		return err
	}
	return r.Actions.Register(r.Tools.Action())
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
