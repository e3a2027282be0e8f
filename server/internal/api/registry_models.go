package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
)

// The model gateway: the operator's providers and prices, a group's model
// settings and budget (resources/model_*.go, group_models.go), usage, and
// the runner's route, reservation and settlement (package metering).

func (s *RegistryService) SetModelProvider(ctx context.Context, req *guardv1.SetModelProviderRequest) (*guardv1.SetModelProviderResponse, error) {
	return s.d.Resources.SetModelProvider(ctx, req)
}

func (s *RegistryService) DeleteModelProvider(ctx context.Context, req *guardv1.DeleteModelProviderRequest) (*guardv1.DeleteModelProviderResponse, error) {
	return s.d.Resources.DeleteModelProvider(ctx, req)
}

func (s *RegistryService) ListModelProviders(ctx context.Context, req *guardv1.ListModelProvidersRequest) (*guardv1.ListModelProvidersResponse, error) {
	return s.d.Resources.ListModelProviders(ctx, req)
}

func (s *RegistryService) GetModelPolicy(ctx context.Context, req *guardv1.GetModelPolicyRequest) (*guardv1.GetModelPolicyResponse, error) {
	return s.d.Resources.GetModelPolicy(ctx, req)
}

func (s *RegistryService) SetModelProviders(ctx context.Context, req *guardv1.SetModelProvidersRequest) (*guardv1.SetModelProvidersResponse, error) {
	return s.d.Resources.SetModelProviders(ctx, req)
}

func (s *RegistryService) SetModelRule(ctx context.Context, req *guardv1.SetModelRuleRequest) (*guardv1.SetModelRuleResponse, error) {
	return s.d.Resources.SetModelRule(ctx, req)
}

func (s *RegistryService) UnsetModelRule(ctx context.Context, req *guardv1.UnsetModelRuleRequest) (*guardv1.UnsetModelRuleResponse, error) {
	return s.d.Resources.UnsetModelRule(ctx, req)
}

func (s *RegistryService) SetModelDefault(ctx context.Context, req *guardv1.SetModelDefaultRequest) (*guardv1.SetModelDefaultResponse, error) {
	return s.d.Resources.SetModelDefault(ctx, req)
}

func (s *RegistryService) SetModelBudget(ctx context.Context, req *guardv1.SetModelBudgetRequest) (*guardv1.SetModelBudgetResponse, error) {
	return s.d.Resources.SetModelBudget(ctx, req)
}

func (s *RegistryService) SetModelPrice(ctx context.Context, req *guardv1.SetModelPriceRequest) (*guardv1.SetModelPriceResponse, error) {
	return s.d.Resources.SetModelPrice(ctx, req)
}

func (s *RegistryService) ListModelPrices(ctx context.Context, req *guardv1.ListModelPricesRequest) (*guardv1.ListModelPricesResponse, error) {
	return s.d.Resources.ListModelPrices(ctx, req)
}

func (s *RegistryService) ListModelUsage(ctx context.Context, req *guardv1.ListModelUsageRequest) (*guardv1.ListModelUsageResponse, error) {
	return s.d.Resources.ListModelUsage(ctx, req)
}

// gatewayCaller is the runner itself: these RPCs are its gateway's, never
// an agent's it speaks for (the route carries the provider's credential).
func gatewayCaller(ctx context.Context) (authn.Caller, error) {
	c, err := runnerCaller(ctx)
	if err != nil {
		return c, err
	}
	if c.Agent != nil {
		return authn.Caller{}, status.Error(codes.PermissionDenied, "the model gateway's RPCs are the runner's own, not an agent's")
	}
	return c, nil
}

// GetModelRoute is where a session's model calls of a kind go, with the
// provider's credential (a session placed on the caller only).
func (s *RegistryService) GetModelRoute(ctx context.Context, req *guardv1.GetModelRouteRequest) (*guardv1.GetModelRouteResponse, error) {
	c, err := gatewayCaller(ctx)
	if err != nil {
		return nil, err
	}
	return s.d.Models.Route(ctx, c.Principal.RunnerID, req)
}

// ReserveModelUsage reserves a call's worst case before it is forwarded.
func (s *RegistryService) ReserveModelUsage(ctx context.Context, req *guardv1.ReserveModelUsageRequest) (*guardv1.ReserveModelUsageResponse, error) {
	c, err := gatewayCaller(ctx)
	if err != nil {
		return nil, err
	}
	return s.d.Models.Reserve(ctx, c.Principal.RunnerID, req)
}

// SettleModelUsage settles a reservation to what the call used, once.
func (s *RegistryService) SettleModelUsage(ctx context.Context, req *guardv1.SettleModelUsageRequest) (*guardv1.SettleModelUsageResponse, error) {
	c, err := gatewayCaller(ctx)
	if err != nil {
		return nil, err
	}
	return s.d.Models.Settle(ctx, c.Principal.RunnerID, req)
}
