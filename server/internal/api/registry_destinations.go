package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Destinations a group may message (resources/destinations.go).

func (s *RegistryService) ListDestinations(ctx context.Context, req *guardv1.ListDestinationsRequest) (*guardv1.ListDestinationsResponse, error) {
	return s.d.Resources.ListDestinations(ctx, req)
}

func (s *RegistryService) AddDestination(ctx context.Context, req *guardv1.AddDestinationRequest) (*guardv1.AddDestinationResponse, error) {
	return s.d.Resources.AddDestination(ctx, req)
}

func (s *RegistryService) RemoveDestination(ctx context.Context, req *guardv1.RemoveDestinationRequest) (*guardv1.RemoveDestinationResponse, error) {
	return s.d.Resources.RemoveDestination(ctx, req)
}
