package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Wirings: chat → agent group (resources/wirings.go).

func (s *RegistryService) ListWirings(ctx context.Context, req *guardv1.ListWiringsRequest) (*guardv1.ListWiringsResponse, error) {
	return s.d.Resources.ListWirings(ctx, req)
}

func (s *RegistryService) CreateWiring(ctx context.Context, req *guardv1.CreateWiringRequest) (*guardv1.CreateWiringResponse, error) {
	return s.d.Resources.CreateWiring(ctx, req)
}

func (s *RegistryService) DeleteWiring(ctx context.Context, req *guardv1.DeleteWiringRequest) (*guardv1.DeleteWiringResponse, error) {
	return s.d.Resources.DeleteWiring(ctx, req)
}
