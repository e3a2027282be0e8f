package app

import (
	"context"

	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/registry"
)

// Registry: runner registration (conformance against the guard catalog),
// the push listener (one LISTEN connection per replica) and the lease sweep
// (every replica; conditional UPDATEs make them safe together).
func init() {
	wirings = append(wirings, func(_ context.Context, d *api.Deps, s *services) error {
		svc := registry.New(d.Store.Pool, d.Metrics, d.Log, registry.Options{
			LeaseTTL:       d.Config.LeaseTTL,
			CitationWindow: d.Config.CitationWindow,
		}, registryCatalog(d))
		d.Registry = svc
		s.background = append(s.background, svc.Listen, svc.SweepLoop)
		return nil
	})
}

// registryCatalog is the guard catalog conformance walks. Until the guard
// is wired it is nil: every mapped delivery action is refused (fail closed).
func registryCatalog(d *api.Deps) registry.Catalog {
	return nil
}
