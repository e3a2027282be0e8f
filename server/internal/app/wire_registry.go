package app

import (
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/registry"
)

// Registry: runner registration (conformance against the guard's own
// catalog — the one Decide uses, so the two cannot disagree),
// the push listener (one LISTEN connection per replica) and the lease sweep
// (every replica; conditional UPDATEs make them safe together).
func wireRegistry(d *api.Deps, s *services) {
	cat := d.Guard.Catalog
	catalog := registry.CatalogFunc(func(action string) bool {
		_, ok := cat.Lookup(action)
		return ok
	})
	svc := registry.New(d.Store.Pool, d.Metrics, d.Log, registry.Options{
		Baseline:       d.Guard.Baseline,
		LeaseTTL:       d.Config.LeaseTTL,
		CitationWindow: d.Config.CitationWindow,
		AckDeadline:    d.Config.PushAckDeadline,
	}, catalog)
	d.Registry = svc
	s.background = append(s.background, svc.Listen, svc.SweepLoop)
}
