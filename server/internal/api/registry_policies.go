package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Agent message policies (resources/policies.go).

func (s *RegistryService) ListPolicies(ctx context.Context, req *guardv1.ListPoliciesRequest) (*guardv1.ListPoliciesResponse, error) {
	return s.d.Resources.ListPolicies(ctx, req)
}

func (s *RegistryService) SetPolicy(ctx context.Context, req *guardv1.SetPolicyRequest) (*guardv1.SetPolicyResponse, error) {
	return s.d.Resources.SetPolicy(ctx, req)
}

func (s *RegistryService) RemovePolicy(ctx context.Context, req *guardv1.RemovePolicyRequest) (*guardv1.RemovePolicyResponse, error) {
	return s.d.Resources.RemovePolicy(ctx, req)
}
