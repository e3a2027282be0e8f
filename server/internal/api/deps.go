// Package api holds the gRPC handlers: thin, one file per service area, each
// RPC validating its input, checking the caller and calling into the domain
// packages (guard, approvals, registry, resources).
package api

import (
	"github.com/clawguard/clawguard/server/internal/admission"
	"log/slog"

	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/chatout"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/inbound"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Deps is what the handlers share. Domain services are added as fields by
// the packages that own them.
type Deps struct {
	Store     *store.Store
	Metrics   *metrics.Metrics
	Log       *slog.Logger
	Config    config.Config
	Auth      *authn.Authenticator
	ReplicaID string
	Inbound   *inbound.Service // RouteInbound: channel registration, sender admission, delivery
	Approvals *approvals.Service
	Resources *resources.Service // admin resources (registry_<resource>.go)
	Registry  *registry.Service  // runners: registration, leases, Connect, ApplyAction
	Guard     *guard.Engine      // the decision function, its catalog and the decision log
	ChatOut   *chatout.Service   // agent replies and notices for chats, read by bridges
	Admission *admission.Limiter // sheds decisions past the adaptive limit (nil = off)
	Validator *edge.Validator    // the protos' request rules (the interceptor; DecideStream per frame)
}
