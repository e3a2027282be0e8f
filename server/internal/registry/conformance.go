package registry

import (
	"fmt"
	"slices"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ExemptDeliveryActions is the SERVER's declared exemption list: delivery
// actions that deliberately carry no catalog mapping. The manifest cannot
// extend it — a runner cannot exempt itself.
//   - cli_request: the transport bridge into the admin RPCs; every inner
//     command is guarded at dispatch, so the envelope carries no privilege.
//   - scheduling self-actions: an agent mutating only its own task rows.
//   - reply: an agent answering into the chat its session talks to (the
//     server takes the chat from the session; the agent cannot name one).
var ExemptDeliveryActions = []string{
	"cli_request",
	"reply",
	"schedule_task",
	"cancel_task",
	"pause_task",
	"resume_task",
	"update_task",
}

// Catalog is what conformance needs from the guard catalog.
type Catalog interface {
	Known(action string) bool
}

// CatalogFunc adapts a lookup function to Catalog.
type CatalogFunc func(action string) bool

// Known reports whether action is a catalog entry.
func (f CatalogFunc) Known(action string) bool { return f(action) }

// IsExempt reports whether an unmapped delivery action is on the exemption list.
func IsExempt(name string) bool { return slices.Contains(ExemptDeliveryActions, name) }

// Violations walks a runner's delivery actions against the catalog; empty
// means conformant. The same walk runs at registration and in CI. A nil
// catalog knows nothing, so every mapping is a violation (fail closed).
func Violations(actions []*guardv1.DeliveryActionDecl, catalog Catalog) []string {
	var out []string
	seen := map[string]string{}
	for _, a := range actions {
		name, mapped := a.GetName(), a.GetCatalogAction()
		if name == "" {
			out = append(out, "a delivery action has no name")
			continue
		}
		if prev, dup := seen[name]; dup {
			if prev != mapped {
				out = append(out, fmt.Sprintf("delivery action %q is declared twice with different mappings (%q, %q)", name, prev, mapped))
			}
			continue
		}
		seen[name] = mapped
		if mapped == "" {
			if !IsExempt(name) {
				out = append(out, fmt.Sprintf("delivery action %q is neither guard-mapped nor on the declared exemption list", name))
			}
			continue
		}
		if catalog == nil || !catalog.Known(mapped) {
			out = append(out, fmt.Sprintf("delivery action %q maps to unregistered guard action %q", name, mapped))
		}
	}
	return out
}
