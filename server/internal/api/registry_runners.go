package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/placement"
)

// runnerCaller is the runner id of a runner token (the rule option already
// admits only runners to these RPCs; this is the second fence).
func runnerCaller(ctx context.Context) (authn.Caller, error) {
	c, ok := authn.FromContext(ctx)
	if !ok || c.Principal.Kind != guardv1.Principal_PRINCIPAL_RUNNER || c.Principal.RunnerID == "" {
		return authn.Caller{}, status.Error(codes.PermissionDenied, "runner token required")
	}
	return c, nil
}

// RegisterRunner checks a runner's manifest against the catalog and grants its lease.
func (s *RegistryService) RegisterRunner(ctx context.Context, req *guardv1.RegisterRunnerRequest) (*guardv1.RegisterRunnerResponse, error) {
	c, err := runnerCaller(ctx)
	if err != nil {
		return nil, err
	}
	token := placement.Identity{Host: c.Principal.Host, Labels: c.Principal.Labels}
	res, err := s.d.Registry.Register(ctx, c.Principal.RunnerID, token, req)
	return res, err
}

// Connect is the runner's stream: hello, then pushes down and acks/heartbeats up.
func (s *RegistryService) Connect(stream guardv1.Registry_ConnectServer) error {
	c, err := runnerCaller(stream.Context())
	if err != nil {
		return err
	}
	return s.d.Registry.Connect(stream, c.Principal.RunnerID)
}

// OpenSession opens (or returns) a group's session on the calling runner.
func (s *RegistryService) OpenSession(ctx context.Context, req *guardv1.OpenSessionRequest) (*guardv1.OpenSessionResponse, error) {
	c, err := runnerCaller(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.d.Registry.OpenSession(ctx, c.Principal.RunnerID, req.GetAgentGroupId(), req.GetMessagingGroupId())
	return res, err
}

// GetSessionConfig reads the group and config of a session the calling runner
// hosts (infrastructure: independent of the agent's cli_scope).
func (s *RegistryService) GetSessionConfig(ctx context.Context, req *guardv1.GetSessionConfigRequest) (*guardv1.GetSessionConfigResponse, error) {
	c, err := runnerCaller(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.d.Registry.SessionConfig(ctx, c.Principal.RunnerID, req.GetSessionId())
	return res, err
}

// ApplyAction performs a mutation on an agent's behalf, citing its ALLOW decision.
func (s *RegistryService) ApplyAction(ctx context.Context, req *guardv1.ApplyActionRequest) (*guardv1.ApplyActionResponse, error) {
	c, err := runnerCaller(ctx)
	if err != nil {
		return nil, err
	}
	asserted := ""
	if c.Agent != nil {
		asserted = c.Agent.SessionID
	}
	res, err := s.d.Registry.ApplyAction(ctx, c.Principal.RunnerID, asserted, req)
	return res, err
}
