package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Groups: agent groups and their container config (resources/groups.go).

func (s *RegistryService) CreateGroup(ctx context.Context, req *guardv1.CreateGroupRequest) (*guardv1.CreateGroupResponse, error) {
	return s.d.Resources.CreateGroup(ctx, req)
}

func (s *RegistryService) GetGroup(ctx context.Context, req *guardv1.GetGroupRequest) (*guardv1.GetGroupResponse, error) {
	return s.d.Resources.GetGroup(ctx, req)
}

func (s *RegistryService) ListGroups(ctx context.Context, req *guardv1.ListGroupsRequest) (*guardv1.ListGroupsResponse, error) {
	return s.d.Resources.ListGroups(ctx, req)
}

func (s *RegistryService) UpdateGroup(ctx context.Context, req *guardv1.UpdateGroupRequest) (*guardv1.UpdateGroupResponse, error) {
	return s.d.Resources.UpdateGroup(ctx, req)
}

func (s *RegistryService) DeleteGroup(ctx context.Context, req *guardv1.DeleteGroupRequest) (*guardv1.DeleteGroupResponse, error) {
	return s.d.Resources.DeleteGroup(ctx, req)
}

func (s *RegistryService) GetGroupConfig(ctx context.Context, req *guardv1.GetGroupConfigRequest) (*guardv1.GetGroupConfigResponse, error) {
	return s.d.Resources.GetGroupConfig(ctx, req)
}

func (s *RegistryService) UpdateGroupConfig(ctx context.Context, req *guardv1.UpdateGroupConfigRequest) (*guardv1.UpdateGroupConfigResponse, error) {
	return s.d.Resources.UpdateGroupConfig(ctx, req)
}

func (s *RegistryService) AddGroupPackage(ctx context.Context, req *guardv1.AddGroupPackageRequest) (*guardv1.AddGroupPackageResponse, error) {
	return s.d.Resources.AddGroupPackage(ctx, req)
}

func (s *RegistryService) RemoveGroupPackage(ctx context.Context, req *guardv1.RemoveGroupPackageRequest) (*guardv1.RemoveGroupPackageResponse, error) {
	return s.d.Resources.RemoveGroupPackage(ctx, req)
}

func (s *RegistryService) AddGroupMcpServer(ctx context.Context, req *guardv1.AddGroupMcpServerRequest) (*guardv1.AddGroupMcpServerResponse, error) {
	return s.d.Resources.AddGroupMcpServer(ctx, req)
}

func (s *RegistryService) RemoveGroupMcpServer(ctx context.Context, req *guardv1.RemoveGroupMcpServerRequest) (*guardv1.RemoveGroupMcpServerResponse, error) {
	return s.d.Resources.RemoveGroupMcpServer(ctx, req)
}

func (s *RegistryService) RestartGroup(ctx context.Context, req *guardv1.RestartGroupRequest) (*guardv1.RestartGroupResponse, error) {
	return s.d.Resources.RestartGroup(ctx, req)
}
