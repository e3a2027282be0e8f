package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// API tokens (resources/tokens.go).

func (s *RegistryService) CreateToken(ctx context.Context, req *guardv1.CreateTokenRequest) (*guardv1.CreateTokenResponse, error) {
	resp, err := s.d.Resources.CreateToken(ctx, req)
	return resp, DBError("token", err)
}

func (s *RegistryService) ListTokens(ctx context.Context, req *guardv1.ListTokensRequest) (*guardv1.ListTokensResponse, error) {
	resp, err := s.d.Resources.ListTokens(ctx, req)
	return resp, DBError("tokens", err)
}

func (s *RegistryService) RevokeToken(ctx context.Context, req *guardv1.RevokeTokenRequest) (*guardv1.RevokeTokenResponse, error) {
	resp, err := s.d.Resources.RevokeToken(ctx, req)
	return resp, DBError("token", err)
}
