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

// Freezes (resources/freezes.go).

func (s *RegistryService) Freeze(ctx context.Context, req *guardv1.FreezeRequest) (*guardv1.FreezeResponse, error) {
	return s.d.Resources.Freeze(ctx, req)
}

func (s *RegistryService) Unfreeze(ctx context.Context, req *guardv1.UnfreezeRequest) (*guardv1.UnfreezeResponse, error) {
	return s.d.Resources.Unfreeze(ctx, req)
}

func (s *RegistryService) ListFreezes(ctx context.Context, req *guardv1.ListFreezesRequest) (*guardv1.ListFreezesResponse, error) {
	return s.d.Resources.ListFreezes(ctx, req)
}
