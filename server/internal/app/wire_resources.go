package app

import (
	"context"

	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// The admin resources: plain reads and writes over the pool. The catalog is
// the guard's; ListCatalog answers Unavailable until one is wired.
func init() {
	wirings = append(wirings, func(_ context.Context, d *api.Deps, _ *services) error {
		d.Resources = resources.New(d.Store.Pool, nil)
		return nil
	})
}
