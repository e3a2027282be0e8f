package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Users (resources/users.go).

func (s *RegistryService) ListUsers(ctx context.Context, req *guardv1.ListUsersRequest) (*guardv1.ListUsersResponse, error) {
	return s.d.Resources.ListUsers(ctx, req)
}

func (s *RegistryService) GetUser(ctx context.Context, req *guardv1.GetUserRequest) (*guardv1.GetUserResponse, error) {
	return s.d.Resources.GetUser(ctx, req)
}

func (s *RegistryService) CreateUser(ctx context.Context, req *guardv1.CreateUserRequest) (*guardv1.CreateUserResponse, error) {
	return s.d.Resources.CreateUser(ctx, req)
}

func (s *RegistryService) UpdateUser(ctx context.Context, req *guardv1.UpdateUserRequest) (*guardv1.UpdateUserResponse, error) {
	return s.d.Resources.UpdateUser(ctx, req)
}
