package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Destinations a group may message (resources/destinations.go).

func (s *RegistryService) ListDestinations(ctx context.Context, req *guardv1.ListDestinationsRequest) (*guardv1.ListDestinationsResponse, error) {
	resp, err := s.d.Resources.ListDestinations(ctx, req)
	return resp, DBError("destinations", err)
}

func (s *RegistryService) AddDestination(ctx context.Context, req *guardv1.AddDestinationRequest) (*guardv1.AddDestinationResponse, error) {
	resp, err := s.d.Resources.AddDestination(ctx, req)
	return resp, DBError("destination", err)
}

func (s *RegistryService) RemoveDestination(ctx context.Context, req *guardv1.RemoveDestinationRequest) (*guardv1.RemoveDestinationResponse, error) {
	resp, err := s.d.Resources.RemoveDestination(ctx, req)
	return resp, DBError("destination", err)
}
