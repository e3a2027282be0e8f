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
		catalog, err := registryCatalog()
		if err != nil {
			return err
		}
		svc := registry.New(d.Store.Pool, d.Metrics, d.Log, registry.Options{
			LeaseTTL:       d.Config.LeaseTTL,
			CitationWindow: d.Config.CitationWindow,
		}, catalog)
		d.Registry = svc
		s.background = append(s.background, svc.Listen, svc.SweepLoop)
		return nil
	})
}

// registryCatalog is the guard catalog conformance walks: built by the same
// registration code as the guard's (declaration is registration), so the
// two cannot disagree.
func registryCatalog() (registry.Catalog, error) {
	cat, err := BuildCatalog()
	if err != nil {
		return nil, err
	}
	return registry.CatalogFunc(func(action string) bool {
		_, ok := cat.Lookup(action)
		return ok
	}), nil
}
