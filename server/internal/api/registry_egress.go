package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Egress: a group's rules for its agents' outbound connections
// (resources/group_egress.go), the facts of net.connect.

func (s *RegistryService) GetEgressPolicy(ctx context.Context, req *guardv1.GetEgressPolicyRequest) (*guardv1.GetEgressPolicyResponse, error) {
	return s.d.Resources.GetEgressPolicy(ctx, req)
}

func (s *RegistryService) SetEgressRule(ctx context.Context, req *guardv1.SetEgressRuleRequest) (*guardv1.SetEgressRuleResponse, error) {
	return s.d.Resources.SetEgressRule(ctx, req)
}

func (s *RegistryService) UnsetEgressRule(ctx context.Context, req *guardv1.UnsetEgressRuleRequest) (*guardv1.UnsetEgressRuleResponse, error) {
	return s.d.Resources.UnsetEgressRule(ctx, req)
}

func (s *RegistryService) SetEgressDefault(ctx context.Context, req *guardv1.SetEgressDefaultRequest) (*guardv1.SetEgressDefaultResponse, error) {
	return s.d.Resources.SetEgressDefault(ctx, req)
}
