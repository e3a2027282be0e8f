package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Group members (resources/members.go).

func (s *RegistryService) ListMembers(ctx context.Context, req *guardv1.ListMembersRequest) (*guardv1.ListMembersResponse, error) {
	return s.d.Resources.ListMembers(ctx, req)
}

func (s *RegistryService) AddMember(ctx context.Context, req *guardv1.AddMemberRequest) (*guardv1.AddMemberResponse, error) {
	return s.d.Resources.AddMember(ctx, req)
}

func (s *RegistryService) RemoveMember(ctx context.Context, req *guardv1.RemoveMemberRequest) (*guardv1.RemoveMemberResponse, error) {
	return s.d.Resources.RemoveMember(ctx, req)
}
