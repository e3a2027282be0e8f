package resources

import (
	"context"
	"slices"
	"strings"

	"github.com/clawguard/clawguard/server/internal/fault"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

// exemptLister is the optional half of a Catalog: the server's declared
// list of delivery actions runners may leave unmapped.
type exemptLister interface {
	ExemptDeliveryActions() []string
}

// ListCatalog lists the guard catalog, sorted by action; any authenticated
// caller may read it (it is what `ncl catalog list` and the runners' banner show).
func (s *Service) ListCatalog(ctx context.Context, req *guardv1.ListCatalogRequest) (_ *guardv1.ListCatalogResponse, err error) {
	defer store.Faulted(&err, "catalog")
	if _, err := s.viewer(ctx); err != nil && fault.KindOf(err) != fault.Denied {
		return nil, err
	}
	if s.catalog == nil {
		return nil, fault.New(fault.Unavailable, "the guard catalog is not wired on this server")
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging on action over the sorted entries (everyone sees the
	// same catalog: the token binds only to the list).
	filter := paging.Filter("catalog")
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	entries := slices.Clone(s.catalog.List())
	slices.SortFunc(entries, func(a, b *guardv1.CatalogEntry) int { return strings.Compare(a.GetAction(), b.GetAction()) })
	if cur != nil {
		from, _ := slices.BinarySearchFunc(entries, cur.ID, func(e *guardv1.CatalogEntry, action string) int {
			return strings.Compare(e.GetAction(), action)
		})
		for from < len(entries) && entries[from].GetAction() <= cur.ID {
			from++
		}
		entries = entries[from:]
	}
	out := &guardv1.ListCatalogResponse{}
	if len(entries) > limit {
		entries = entries[:limit]
		out.NextPageToken = paging.NextKey("", entries[limit-1].GetAction(), filter)
	}
	out.Entries = entries
	if err := s.withSettings(ctx, out.Entries); err != nil {
		return nil, err
	}
	if e, ok := s.catalog.(exemptLister); ok {
		out.ExemptDeliveryActions = slices.Sorted(slices.Values(e.ExemptDeliveryActions()))
	}
	return out, nil
}

// CatalogFunc adapts two functions to a Catalog (for the app wiring).
type CatalogFunc struct {
	Entries func() []*guardv1.CatalogEntry
	Exempt  func() []string
}

// List implements Catalog.
func (f CatalogFunc) List() []*guardv1.CatalogEntry { return f.Entries() }

// ExemptDeliveryActions implements exemptLister.
func (f CatalogFunc) ExemptDeliveryActions() []string {
	if f.Exempt == nil {
		return nil
	}
	return f.Exempt()
}
