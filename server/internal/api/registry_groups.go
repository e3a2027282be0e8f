package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Groups: agent groups and their container config (resources/groups.go).

func (s *RegistryService) CreateGroup(ctx context.Context, req *guardv1.CreateGroupRequest) (*guardv1.CreateGroupResponse, error) {
	resp, err := s.d.Resources.CreateGroup(ctx, req)
	return resp, DBError("group", err)
}

func (s *RegistryService) GetGroup(ctx context.Context, req *guardv1.GetGroupRequest) (*guardv1.GetGroupResponse, error) {
	resp, err := s.d.Resources.GetGroup(ctx, req)
	return resp, DBError("group", err)
}

func (s *RegistryService) ListGroups(ctx context.Context, req *guardv1.ListGroupsRequest) (*guardv1.ListGroupsResponse, error) {
	resp, err := s.d.Resources.ListGroups(ctx, req)
	return resp, DBError("groups", err)
}

func (s *RegistryService) UpdateGroup(ctx context.Context, req *guardv1.UpdateGroupRequest) (*guardv1.UpdateGroupResponse, error) {
	resp, err := s.d.Resources.UpdateGroup(ctx, req)
	return resp, DBError("group", err)
}

func (s *RegistryService) DeleteGroup(ctx context.Context, req *guardv1.DeleteGroupRequest) (*guardv1.DeleteGroupResponse, error) {
	resp, err := s.d.Resources.DeleteGroup(ctx, req)
	return resp, DBError("group", err)
}

func (s *RegistryService) GetGroupConfig(ctx context.Context, req *guardv1.GetGroupConfigRequest) (*guardv1.GetGroupConfigResponse, error) {
	resp, err := s.d.Resources.GetGroupConfig(ctx, req)
	return resp, DBError("group config", err)
}

func (s *RegistryService) UpdateGroupConfig(ctx context.Context, req *guardv1.UpdateGroupConfigRequest) (*guardv1.UpdateGroupConfigResponse, error) {
	resp, err := s.d.Resources.UpdateGroupConfig(ctx, req)
	return resp, DBError("group config", err)
}

func (s *RegistryService) AddGroupPackage(ctx context.Context, req *guardv1.AddGroupPackageRequest) (*guardv1.AddGroupPackageResponse, error) {
	resp, err := s.d.Resources.AddGroupPackage(ctx, req)
	return resp, DBError("group package", err)
}

func (s *RegistryService) RemoveGroupPackage(ctx context.Context, req *guardv1.RemoveGroupPackageRequest) (*guardv1.RemoveGroupPackageResponse, error) {
	resp, err := s.d.Resources.RemoveGroupPackage(ctx, req)
	return resp, DBError("group package", err)
}

func (s *RegistryService) AddGroupMcpServer(ctx context.Context, req *guardv1.AddGroupMcpServerRequest) (*guardv1.AddGroupMcpServerResponse, error) {
	resp, err := s.d.Resources.AddGroupMcpServer(ctx, req)
	return resp, DBError("MCP server", err)
}

func (s *RegistryService) RemoveGroupMcpServer(ctx context.Context, req *guardv1.RemoveGroupMcpServerRequest) (*guardv1.RemoveGroupMcpServerResponse, error) {
	resp, err := s.d.Resources.RemoveGroupMcpServer(ctx, req)
	return resp, DBError("MCP server", err)
}

func (s *RegistryService) RestartGroup(ctx context.Context, req *guardv1.RestartGroupRequest) (*guardv1.RestartGroupResponse, error) {
	resp, err := s.d.Resources.RestartGroup(ctx, req)
	return resp, DBError("group", err)
}
