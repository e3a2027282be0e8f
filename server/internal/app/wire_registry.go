package app

import (
	"context"
	"errors"

	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/registry"
)

// Registry: runner registration (conformance against the guard's own
// catalog — the one Decide uses, so the two cannot disagree),
// the push listener (one LISTEN connection per replica) and the lease sweep
// (every replica; conditional UPDATEs make them safe together).
func init() {
	wirings = append(wirings, func(_ context.Context, d *api.Deps, s *services) error {
		if d.Guard == nil || d.Guard.Catalog == nil {
			return errors.New("registry wiring needs the guard catalog (wire_guard runs first)")
		}
		cat := d.Guard.Catalog
		catalog := registry.CatalogFunc(func(action string) bool {
			_, ok := cat.Lookup(action)
			return ok
		})
		svc := registry.New(d.Store.Pool, d.Metrics, d.Log, registry.Options{
			LeaseTTL:       d.Config.LeaseTTL,
			CitationWindow: d.Config.CitationWindow,
			AckDeadline:    d.Config.PushAckDeadline,
		}, catalog)
		svc.SetBaseline(d.Guard.Baseline)
		d.Registry = svc
		s.background = append(s.background, svc.Listen, svc.SweepLoop)
		return nil
	})
}
