package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Standing grants (approvals/standing.go): listed and revoked by the
// operator and by the users who may resolve their holds.

func (s *ApprovalsService) ListStandingGrants(ctx context.Context, req *guardv1.ListStandingGrantsRequest) (*guardv1.ListStandingGrantsResponse, error) {
	_, v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	gs, err := s.d.Approvals.ListStanding(ctx, v, req.GetAgentGroupId(), req.GetIncludeEnded())
	if err != nil {
		return nil, err
	}
	return &guardv1.ListStandingGrantsResponse{Grants: gs}, nil
}

func (s *ApprovalsService) RevokeStandingGrant(ctx context.Context, req *guardv1.RevokeStandingGrantRequest) (*guardv1.RevokeStandingGrantResponse, error) {
	caller, v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() == "" {
		return nil, InvalidArgument("id", "required")
	}
	by := caller.Principal.UserID
	if by == "" {
		by = "operator"
	}
	g, err := s.d.Approvals.RevokeStanding(ctx, v, by, req.GetId())
	if err != nil {
		return nil, err
	}
	return &guardv1.RevokeStandingGrantResponse{Grant: g}, nil
}
