package app

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/listener"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/sessions"
	"github.com/clawguard/clawguard/server/internal/snapshot"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// services is what the domain packages contribute to the server. Each
// domain's wiring lives in its own wire_*.go file in this package.
type services struct {
	guard      *api.GuardService
	approvals  *api.ApprovalsService
	registry   *api.RegistryService
	chain      Chain
	background []func(ctx context.Context) error
	shutdown   []func()
}

// buildServices builds the domain services in dependency order, each from
// what the steps above it built: it reads top to bottom. A step sets its
// service on d and adds interceptors, background loops and shutdown hooks
// to s. The last step is the replica's one LISTEN connection, with a
// handler for each domain's NOTIFY channel. Last, each gRPC service is
// handed exactly the parts its handlers use.
func buildServices(ctx context.Context, d *Parts) (*services, error) {
	s := &services{}
	// Every answer's secrets redacted, the outermost domain interceptor: the
	// console's in-process calls run this chain too (api/redact.go).
	s.chain.Unary = append(s.chain.Unary, api.RedactUnary)
	s.chain.Stream = append(s.chain.Stream, api.RedactStream)
	// The hold contract first: the guard creates holds through it, inbound
	// and the admin replay register their after-approve handlers on it.
	if err := wireApprovals(ctx, d, s); err != nil {
		return nil, err
	}
	wireChatOut(d)
	if err := wireDecisionExport(d, s); err != nil {
		return nil, err
	}
	// The catalog and the decision engine, which every later step consults.
	if err := wireGuard(ctx, d, s); err != nil {
		return nil, err
	}
	wireInbound(d, s)
	if err := wireRegistry(d, s); err != nil {
		return nil, err
	}
	wireResources(d)
	wireModels(d, s)
	// The admin RPCs' guard: the handlers' checks (resources), then the guard.
	wireAdminGuard(d, s)
	wireRetention(d, s)
	// The replica's one LISTEN connection (outside the pool, one reconnect
	// loop): every domain a NOTIFY wakes registers its channel here. Hold
	// events wake the event reader (Watch, Await, webhook), runner pushes
	// the runners' Connect streams; after each reconnect every handler
	// re-reads what it may have missed (HandleBacklog).
	l := listener.New(d.Store.Pool.Config().ConnConfig, d.Log)
	l.Handle(approvals.EventsChannel, d.Approvals.EventWakeups())
	l.Handle(registry.PushChannel, d.Registry.PushWakeups())
	if d.Snapshot != nil {
		l.Handle(snapshot.Channel, d.Snapshot)
	}
	s.background = append(s.background, l.Run)

	s.guard = api.NewGuardService(api.GuardDeps{
		Engine: d.Guard, Reads: callerReads{d.Store.Pool}, Metrics: d.Metrics, Log: d.Log,
		Admission: d.Admission, Validator: d.Validator, HeldByTheirRPC: commands.HeldByTheirRPC(d.Guard.Catalog),
		Tracer: frameTracer(d),
	})
	s.approvals = api.NewApprovalsService(api.ApprovalsDeps{
		Approvals: d.Approvals, Catalog: d.Guard.Catalog, Log: d.Log,
		SessionGroup: func(ctx context.Context, id string) (string, bool, error) {
			return sessions.Group(ctx, d.Store.Pool, id)
		},
	})
	s.registry = api.NewRegistryService(api.RegistryDeps{
		Resources: d.Resources, Registry: d.Registry, Inbound: d.Inbound, ChatOut: d.ChatOut,
		Models: d.Models, Catalog: d.Guard.Catalog, Log: d.Log,
	})
	return s, nil
}

// callerReads are the Guard service's caller checks' reads, each through
// the package that owns its table.
type callerReads struct{ pool *pgxpool.Pool }

func (r callerReads) Roles(ctx context.Context, user string) (approvals.Roles, error) {
	roles, err := approvals.LoadRoles(ctx, r.pool, user)
	return roles, store.Fault("roles", err)
}

func (r callerReads) ChatVisible(ctx context.Context, groups []string, chat string) (bool, error) {
	ok, err := resources.ChatVisible(ctx, r.pool, groups, chat)
	return ok, store.Fault("messaging group", err)
}

func (r callerReads) ChatChannel(ctx context.Context, chat string) (string, bool, error) {
	return resources.ChatChannel(ctx, r.pool, chat)
}

// frameTracer is the tracer of DecideStream frames' spans, nil when tracing
// is off (a frame's trace context is then only kept, not recorded).
func frameTracer(d *Parts) trace.Tracer {
	if !d.Tracing.Enabled() {
		return nil
	}
	return d.Tracing.Tracer()
}
