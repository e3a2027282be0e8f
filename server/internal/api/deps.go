// Package api holds the gRPC handlers: thin, one file per service area, each
// RPC validating its input, checking the caller and calling into the domain
// packages (guard, approvals, registry, resources).
//
// Each service is handed only what its handlers use (GuardDeps,
// ApprovalsDeps, RegistryDeps, and AdminGuardDeps for the admin-RPC
// interceptor), no shared service locator. errors.go's Status is the one
// mapping of what went wrong to a code: a fault's kind, a status the edge
// made, a context error, an unavailable database. redact.go is the
// interceptor every answer passes through, first of the domain interceptors
// (the console's in-process calls and Watch run it too), which redacts every
// secret (proto/secret) but for the runner's own reads of rules that say
// reveals_secrets (SECURITY.md, "Who may read what").
package api

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/admission"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/chatout"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/inbound"
	"github.com/clawguard/clawguard/server/internal/metering"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// Each service area is handed what its handlers use and nothing else;
// app.buildServices assembles them.

// GuardDeps is what the Guard service (guard*.go) uses.
type GuardDeps struct {
	Engine    *guard.Engine      // the decision function, its catalog and the decision log
	Reads     CallerReads        // what the caller checks read (a user's roles, a chat)
	Metrics   *metrics.Metrics   // shed decisions, the admission limit
	Log       *slog.Logger       //
	Admission *admission.Limiter // sheds decisions past the adaptive limit (nil = off)
	Validator *edge.Validator    // the protos' request rules, per DecideStream frame
	// HeldByTheirRPC are the catalog actions whose holds only the admin-RPC
	// interceptor creates (the RPC itself is the held payload): a card for
	// one through Guard.Decide is refused.
	HeldByTheirRPC map[string]bool
	// Tracer starts a span per DecideStream frame that carries a trace
	// context (nil: tracing is off; the frame's context still reaches a
	// hold it creates).
	Tracer trace.Tracer
}

// ApprovalsDeps is what the Approvals service (approvals.go) uses.
type ApprovalsDeps struct {
	Approvals *approvals.Service // the hold contract
	Catalog   *guard.Catalog     // which kinds a Request may file (nil: none)
	// SessionGroup is a session's group (found false: no such session).
	SessionGroup func(ctx context.Context, sessionID string) (group string, found bool, err error)
	Log          *slog.Logger
}

// RegistryDeps is what the Registry service (registry_*.go) uses.
type RegistryDeps struct {
	Resources *resources.Service // admin resources (registry_<resource>.go)
	Registry  *registry.Service  // runners: registration, leases, Connect, ApplyAction
	Inbound   *inbound.Service   // RouteInbound: channel registration, sender admission, delivery
	ChatOut   *chatout.Service   // agent replies and notices for chats, read by bridges
	Models    *metering.Service  // the model gateway's routes, reservations and settlements
	Catalog   *guard.Catalog     // re-explains logged decisions
	Log       *slog.Logger
}

// AdminGuardDeps is what the admin-RPC interceptor (admin_guard.go) uses.
type AdminGuardDeps struct {
	Engine *guard.Engine // consulted for every admin RPC
	// CLIScope is a group's cli_scope ("group" without a config row).
	CLIScope func(ctx context.Context, group string) (string, error)
	// Notify queues a notice for a session's agent (the replay's outcome).
	Notify func(ctx context.Context, sessionID string, n *guardv1.NotifyAgent) error
	Log    *slog.Logger
	// Precheck is the handlers' own request checks (resources.Service.Precheck),
	// run before the guard is consulted (nil: none).
	Precheck func(proto.Message) error
	// GroupID resolves a group name or id to its id ("" when neither);
	// RPCs a bridge calls for a chat user take names as people type them.
	GroupID func(ctx context.Context, ref string) (string, error)
}

// CallerReads are the reads the Guard service's caller checks make, each
// from the package that owns the table.
type CallerReads interface {
	// Roles are a user's roles (approvals.LoadRoles).
	Roles(ctx context.Context, user string) (approvals.Roles, error)
	// ChatVisible: a chat is wired to one of groups (resources.ChatVisible).
	ChatVisible(ctx context.Context, groups []string, chat string) (bool, error)
	// ChatChannel is a chat's channel type (resources.ChatChannel).
	ChatChannel(ctx context.Context, chat string) (channel string, found bool, err error)
}
