package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Messaging groups: chats (resources/messaging_groups.go).

func (s *RegistryService) ListMessagingGroups(ctx context.Context, req *guardv1.ListMessagingGroupsRequest) (*guardv1.ListMessagingGroupsResponse, error) {
	return s.d.Resources.ListMessagingGroups(ctx, req)
}

func (s *RegistryService) GetMessagingGroup(ctx context.Context, req *guardv1.GetMessagingGroupRequest) (*guardv1.GetMessagingGroupResponse, error) {
	return s.d.Resources.GetMessagingGroup(ctx, req)
}

func (s *RegistryService) CreateMessagingGroup(ctx context.Context, req *guardv1.CreateMessagingGroupRequest) (*guardv1.CreateMessagingGroupResponse, error) {
	return s.d.Resources.CreateMessagingGroup(ctx, req)
}

func (s *RegistryService) UpdateMessagingGroup(ctx context.Context, req *guardv1.UpdateMessagingGroupRequest) (*guardv1.UpdateMessagingGroupResponse, error) {
	return s.d.Resources.UpdateMessagingGroup(ctx, req)
}

func (s *RegistryService) DeleteMessagingGroup(ctx context.Context, req *guardv1.DeleteMessagingGroupRequest) (*guardv1.DeleteMessagingGroupResponse, error) {
	return s.d.Resources.DeleteMessagingGroup(ctx, req)
}
