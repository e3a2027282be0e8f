package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The guard catalog (resources/catalog.go).

func (s *RegistryService) ListCatalog(ctx context.Context, req *guardv1.ListCatalogRequest) (*guardv1.ListCatalogResponse, error) {
	resp, err := s.d.Resources.ListCatalog(ctx, req)
	return resp, DBError("catalog", err)
}

func (s *RegistryService) SetActionSettings(ctx context.Context, req *guardv1.SetActionSettingsRequest) (*guardv1.SetActionSettingsResponse, error) {
	resp, err := s.d.Resources.SetActionSettings(ctx, req)
	return resp, DBError("action settings", err)
}
