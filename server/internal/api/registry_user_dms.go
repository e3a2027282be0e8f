package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// User DM addresses (resources/user_dms.go).

func (s *RegistryService) ListUserDms(ctx context.Context, req *guardv1.ListUserDmsRequest) (*guardv1.ListUserDmsResponse, error) {
	return s.d.Resources.ListUserDms(ctx, req)
}

func (s *RegistryService) SetUserDm(ctx context.Context, req *guardv1.SetUserDmRequest) (*guardv1.SetUserDmResponse, error) {
	return s.d.Resources.SetUserDm(ctx, req)
}

func (s *RegistryService) RemoveUserDm(ctx context.Context, req *guardv1.RemoveUserDmRequest) (*guardv1.RemoveUserDmResponse, error) {
	return s.d.Resources.RemoveUserDm(ctx, req)
}

// OIDC bindings (resources/oidc_bindings.go).

func (s *RegistryService) BindOidc(ctx context.Context, req *guardv1.BindOidcRequest) (*guardv1.BindOidcResponse, error) {
	return s.d.Resources.BindOidc(ctx, req)
}

func (s *RegistryService) UnbindOidc(ctx context.Context, req *guardv1.UnbindOidcRequest) (*guardv1.UnbindOidcResponse, error) {
	return s.d.Resources.UnbindOidc(ctx, req)
}
