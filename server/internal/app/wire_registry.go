package app

import (
	"slices"

	"github.com/clawguard/clawguard/server/internal/a2a"
	"github.com/clawguard/clawguard/server/internal/agents"
	"github.com/clawguard/clawguard/server/internal/mcpcalls"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/selfmod"
)

// Registry: runner registration (conformance against the guard's own
// catalog — the one Decide uses, so the two cannot disagree) and the lease
// sweep (every replica; conditional UPDATEs make them safe together).
// ApplyAction performs what the domains hand it apply steps for. Its push
// wake-ups ride the replica's listener (see buildServices).
func wireRegistry(d *Parts, s *services) error {
	cat := d.Guard.Catalog
	catalog := registry.CatalogFunc(func(action string) bool {
		_, ok := cat.Lookup(action)
		return ok
	})
	svc, err := registry.New(d.Store.Pool, d.Metrics, d.Log, registry.Options{
		Baseline:       d.Guard.Baseline,
		LeaseTTL:       d.Config.LeaseTTL,
		CitationWindow: d.Config.CitationWindow,
		AckDeadline:    d.Config.PushAckDeadline,
		Appliers:       Appliers(),
	}, catalog)
	if err != nil {
		return err
	}
	d.Registry = svc
	s.background = append(s.background, svc.SweepLoop)
	return nil
}

// Appliers are the apply steps of the actions a runner applies, each from
// the domain that registers the action's catalog entry (BuildCatalog).
func Appliers() []registry.Applier {
	return slices.Concat(agents.Appliers(), a2a.Appliers(), selfmod.Appliers(), mcpcalls.Appliers())
}
