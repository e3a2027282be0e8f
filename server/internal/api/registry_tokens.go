package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// API tokens (resources/tokens.go).

func (s *RegistryService) CreateToken(ctx context.Context, req *guardv1.CreateTokenRequest) (*guardv1.CreateTokenResponse, error) {
	return s.d.Resources.CreateToken(ctx, req)
}

func (s *RegistryService) ListTokens(ctx context.Context, req *guardv1.ListTokensRequest) (*guardv1.ListTokensResponse, error) {
	return s.d.Resources.ListTokens(ctx, req)
}

func (s *RegistryService) RevokeToken(ctx context.Context, req *guardv1.RevokeTokenRequest) (*guardv1.RevokeTokenResponse, error) {
	return s.d.Resources.RevokeToken(ctx, req)
}
