package app

import (
	"context"

	"github.com/clawguard/clawguard/server/internal/api"
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
// to s.
func buildServices(ctx context.Context, d *api.Deps) (*services, error) {
	s := &services{}
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
	if err := wireGuard(d, s); err != nil {
		return nil, err
	}
	wireInbound(d, s)
	if err := wireRegistry(d, s); err != nil {
		return nil, err
	}
	wireResources(d)
	wireRetention(d, s)

	s.guard = api.NewGuardService(d)
	s.approvals = api.NewApprovalsService(d)
	s.registry = api.NewRegistryService(d)
	return s, nil
}
