package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The decision log (resources/decisions.go).

func (s *RegistryService) ListDecisions(ctx context.Context, req *guardv1.ListDecisionsRequest) (*guardv1.ListDecisionsResponse, error) {
	resp, err := s.d.Resources.ListDecisions(ctx, req)
	return resp, DBError("decisions", err)
}
