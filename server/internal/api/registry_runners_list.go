package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Runner listing (resources/runners.go).

func (s *RegistryService) ListRunners(ctx context.Context, req *guardv1.ListRunnersRequest) (*guardv1.ListRunnersResponse, error) {
	return s.d.Resources.ListRunners(ctx, req)
}
