package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Role grants, scope always explicit (resources/roles.go).

func (s *RegistryService) ListRoles(ctx context.Context, req *guardv1.ListRolesRequest) (*guardv1.ListRolesResponse, error) {
	return s.d.Resources.ListRoles(ctx, req)
}

func (s *RegistryService) GrantRole(ctx context.Context, req *guardv1.GrantRoleRequest) (*guardv1.GrantRoleResponse, error) {
	return s.d.Resources.GrantRole(ctx, req)
}

func (s *RegistryService) RevokeRole(ctx context.Context, req *guardv1.RevokeRoleRequest) (*guardv1.RevokeRoleResponse, error) {
	return s.d.Resources.RevokeRole(ctx, req)
}
