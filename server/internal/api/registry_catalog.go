package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The guard catalog (resources/catalog.go).

func (s *RegistryService) ListCatalog(ctx context.Context, req *guardv1.ListCatalogRequest) (*guardv1.ListCatalogResponse, error) {
	return s.d.Resources.ListCatalog(ctx, req)
}

func (s *RegistryService) SetActionSettings(ctx context.Context, req *guardv1.SetActionSettingsRequest) (*guardv1.SetActionSettingsResponse, error) {
	return s.d.Resources.SetActionSettings(ctx, req)
}
