package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Guarded MCP servers: the operator's settings (resources/group_mcp_tools.go)
// and the runners' reports of what they host.

func (s *RegistryService) ListMcpServers(ctx context.Context, req *guardv1.ListMcpServersRequest) (*guardv1.ListMcpServersResponse, error) {
	return s.d.Resources.ListMcpServers(ctx, req)
}

func (s *RegistryService) SetMcpServerDefault(ctx context.Context, req *guardv1.SetMcpServerDefaultRequest) (*guardv1.SetMcpServerDefaultResponse, error) {
	return s.d.Resources.SetMcpServerDefault(ctx, req)
}

func (s *RegistryService) ListMcpTools(ctx context.Context, req *guardv1.ListMcpToolsRequest) (*guardv1.ListMcpToolsResponse, error) {
	return s.d.Resources.ListMcpTools(ctx, req)
}

func (s *RegistryService) SetMcpTool(ctx context.Context, req *guardv1.SetMcpToolRequest) (*guardv1.SetMcpToolResponse, error) {
	return s.d.Resources.SetMcpTool(ctx, req)
}

// ReportMcpTools takes a runner's report of a server it hosts for a session
// placed on it, and answers the tools' effects for that session's group.
func (s *RegistryService) ReportMcpTools(ctx context.Context, req *guardv1.ReportMcpToolsRequest) (*guardv1.ReportMcpToolsResponse, error) {
	c, err := runnerCaller(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.d.Resources.ReportMcpTools(ctx, c.Principal.RunnerID, req)
	return resp, err
}
