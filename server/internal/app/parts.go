package app

import (
	"log/slog"

	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/server/internal/admission"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/chatout"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/inbound"
	"github.com/clawguard/clawguard/server/internal/metering"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/snapshot"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Parts is what a replica is built from: the shared base New makes, then
// each domain service as its wire_*.go step builds it (buildServices, top
// to bottom). Only app sees the whole of it: the gRPC handlers are each
// handed the few parts they use (api.GuardDeps, api.ApprovalsDeps, …).
// Tests reach a replica's domains through Server.Deps.
type Parts struct {
	// The base, made by New.
	Store     *store.Store
	Metrics   *metrics.Metrics
	Pools     *metrics.Pools // the Postgres pools' statistics, each pool added where it is opened
	Log       *slog.Logger
	Config    config.Config
	Auth      *authn.Authenticator
	Validator *edge.Validator    // the protos' request rules (the interceptor; DecideStream per frame)
	Tracing   *telemetry.Tracing // OpenTelemetry (off: the no-op provider)

	// The domains, in the order buildServices makes them.
	Approvals *approvals.Service
	ChatOut   *chatout.Service   // agent replies and notices for chats, read by bridges
	Guard     *guard.Engine      // the decision function, its catalog and the decision log
	Snapshot  *snapshot.Snapshot // the guard's fact tables in memory (nil = --fact-snapshot=false)
	Admission *admission.Limiter // sheds decisions past the adaptive limit (nil = off)
	Inbound   *inbound.Service   // RouteInbound: channel registration, sender admission, delivery
	Registry  *registry.Service  // runners: registration, leases, Connect, ApplyAction
	Resources *resources.Service // the admin resources
	Models    *metering.Service  // the model gateway: routes, reservations, settlements
}
