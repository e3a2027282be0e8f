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

// wirings run in order; each may set fields on d (domain services) and
// append interceptors, background loops and shutdown hooks to s.
var wirings []func(ctx context.Context, d *api.Deps, s *services) error

func buildServices(ctx context.Context, d *api.Deps) (*services, error) {
	s := &services{}
	for _, w := range wirings {
		if err := w(ctx, d, s); err != nil {
			return nil, err
		}
	}
	s.guard = api.NewGuardService(d)
	s.approvals = api.NewApprovalsService(d)
	s.registry = api.NewRegistryService(d)
	return s, nil
}
