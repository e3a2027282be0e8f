package app

import (
	"slices"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/a2a"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// The admin resources: plain reads and writes over the pool; ListCatalog
// shows the guard's catalog and the registry's declared exemption list; a
// message policy set carries its pending holds along (a2a.FollowPolicyTx).
func wireResources(d *Parts) {
	d.Resources = resources.New(d.Store.Pool, catalogView(d.Guard.Catalog), a2a.FollowPolicyTx)
}

func catalogView(c *guard.Catalog) resources.Catalog {
	return resources.CatalogFunc{
		Entries: func() []*guardv1.CatalogEntry {
			es := c.List()
			out := make([]*guardv1.CatalogEntry, 0, len(es))
			for _, e := range es {
				out = append(out, &guardv1.CatalogEntry{
					Action: e.Action, ApprovalAction: e.ApprovalAction, Access: e.Access,
					Resource: e.Resource, Description: e.Description,
				})
			}
			return out
		},
		Exempt: func() []string { return slices.Clone(registry.ExemptDeliveryActions) },
	}
}
