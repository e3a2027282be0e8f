// Package api holds the gRPC handlers: thin, one file per service area, each
// RPC validating its input, checking the caller and calling into the domain
// packages (guard, approvals, registry, resources).
package api

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/server/internal/admission"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/chatout"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/inbound"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// Each service area is handed what its handlers use and nothing else;
// app.buildServices assembles them.

// GuardDeps is what the Guard service (guard*.go) uses.
type GuardDeps struct {
	Engine    *guard.Engine      // the decision function, its catalog and the decision log
	Pool      *pgxpool.Pool      // the caller checks' reads (a session's chat, a user's roles)
	Metrics   *metrics.Metrics   // shed decisions, the admission limit
	Log       *slog.Logger       //
	Admission *admission.Limiter // sheds decisions past the adaptive limit (nil = off)
	Validator *edge.Validator    // the protos' request rules, per DecideStream frame
	// HeldByTheirRPC are the catalog actions whose holds only the admin-RPC
	// interceptor creates (the RPC itself is the held payload): a card for
	// one through Guard.Decide is refused.
	HeldByTheirRPC map[string]bool
}

// ApprovalsDeps is what the Approvals service (approvals.go) uses.
type ApprovalsDeps struct {
	Approvals *approvals.Service // the hold contract
	Catalog   *guard.Catalog     // which kinds a Request may file (nil: none)
	Pool      *pgxpool.Pool      // the caller checks' reads (a session's group)
	Log       *slog.Logger
}

// RegistryDeps is what the Registry service (registry_*.go) uses.
type RegistryDeps struct {
	Resources *resources.Service // admin resources (registry_<resource>.go)
	Registry  *registry.Service  // runners: registration, leases, Connect, ApplyAction
	Inbound   *inbound.Service   // RouteInbound: channel registration, sender admission, delivery
	ChatOut   *chatout.Service   // agent replies and notices for chats, read by bridges
	Catalog   *guard.Catalog     // re-explains logged decisions
	Log       *slog.Logger
}

// AdminGuardDeps is what the admin-RPC interceptor (admin_guard.go) uses.
type AdminGuardDeps struct {
	Engine *guard.Engine // consulted for every admin RPC
	Pool   *pgxpool.Pool // cli_scope reads and the replay's transaction
	Log    *slog.Logger
	// Precheck is the handlers' own request checks (resources.Service.Precheck),
	// run before the guard is consulted (nil: none).
	Precheck func(proto.Message) error
}
