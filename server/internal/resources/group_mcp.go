package resources

import (
	"context"
	"slices"

	"github.com/clawguard/clawguard/server/internal/fault"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// AddGroupMcpServer adds an MCP server (unique by name) and restarts the
// group's containers.
func (s *Service) AddGroupMcpServer(ctx context.Context, req *guardv1.AddGroupMcpServerRequest) (_ *guardv1.AddGroupMcpServerResponse, err error) {
	defer store.Faulted(&err, "MCP server")
	if err := checkAddGroupMcpServer(req); err != nil {
		return nil, err
	}
	srv := req.GetServer()
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *GroupConfig) (configChange, error) {
		if slices.ContainsFunc(c.MCP, func(m MCPServer) bool { return m.Name == srv.GetName() }) {
			return configChange{}, fault.Existsf("group %q already has MCP server %q", req.GetGroup(), srv.GetName())
		}
		c.MCP = append(c.MCP, MCPServer{Name: srv.GetName(), Command: srv.GetCommand(), Args: srv.GetArgs(), Env: srv.GetEnv(), Image: srv.GetImage()})
		return configChange{container: true, reason: "MCP server added", rebuild: false}, nil
	})
	if err != nil {
		return nil, err
	}
	cfg, err := out.proto()
	if err != nil {
		return nil, err
	}
	return &guardv1.AddGroupMcpServerResponse{Config: cfg}, nil
}

// RemoveGroupMcpServer removes an MCP server by name.
func (s *Service) RemoveGroupMcpServer(ctx context.Context, req *guardv1.RemoveGroupMcpServerRequest) (_ *guardv1.RemoveGroupMcpServerResponse, err error) {
	defer store.Faulted(&err, "MCP server")
	if err := checkRemoveGroupMcpServer(req); err != nil {
		return nil, err
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *GroupConfig) (configChange, error) {
		i := slices.IndexFunc(c.MCP, func(m MCPServer) bool { return m.Name == req.GetName() })
		if i < 0 {
			return configChange{}, notFound("group %q has no MCP server %q", req.GetGroup(), req.GetName())
		}
		c.MCP = slices.Delete(c.MCP, i, i+1)
		return configChange{container: true, reason: "MCP server removed", rebuild: false}, nil
	})
	if err != nil {
		return nil, err
	}
	cfg, err := out.proto()
	if err != nil {
		return nil, err
	}
	return &guardv1.RemoveGroupMcpServerResponse{Config: cfg}, nil
}
