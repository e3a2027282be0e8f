package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Wirings: chat → agent group (resources/wirings.go).

func (s *RegistryService) ListWirings(ctx context.Context, req *guardv1.ListWiringsRequest) (*guardv1.ListWiringsResponse, error) {
	resp, err := s.d.Resources.ListWirings(ctx, req)
	return resp, DBError("wirings", err)
}

func (s *RegistryService) CreateWiring(ctx context.Context, req *guardv1.CreateWiringRequest) (*guardv1.CreateWiringResponse, error) {
	resp, err := s.d.Resources.CreateWiring(ctx, req)
	return resp, DBError("wiring", err)
}

func (s *RegistryService) DeleteWiring(ctx context.Context, req *guardv1.DeleteWiringRequest) (*guardv1.DeleteWiringResponse, error) {
	resp, err := s.d.Resources.DeleteWiring(ctx, req)
	return resp, DBError("wiring", err)
}
