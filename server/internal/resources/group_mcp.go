package resources

import (
	"context"
	"slices"

	"github.com/clawguard/clawguard/server/internal/fault"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/server/internal/store"
)

// AddGroupMcpServer adds an MCP server (unique by name), or with replace
// replaces the group's server of that name, and restarts the group's
// containers. Its environment's values are write-only: a value written as
// "<redacted>" (what every read shows) keeps the replaced server's value
// of that key, and a server identical to the one it replaces changes
// nothing.
func (s *Service) AddGroupMcpServer(ctx context.Context, req *guardv1.AddGroupMcpServerRequest) (_ *guardv1.AddGroupMcpServerResponse, err error) {
	defer store.Faulted(&err, "MCP server")
	if err := checkAddGroupMcpServer(req); err != nil {
		return nil, err
	}
	srv := req.GetServer()
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *GroupConfig) (configChange, error) {
		i := slices.IndexFunc(c.MCP, func(m MCPServer) bool { return m.Name == srv.GetName() })
		if i >= 0 && !req.GetReplace() {
			return configChange{}, fault.Existsf("group %q already has MCP server %q (replace it with --replace)", req.GetGroup(), srv.GetName())
		}
		var old *MCPServer
		if i >= 0 {
			old = &c.MCP[i]
		}
		env, err := keptEnv(srv.GetEnv(), old, req.GetGroup())
		if err != nil {
			return configChange{}, err
		}
		next := MCPServer{Name: srv.GetName(), Command: srv.GetCommand(), Args: srv.GetArgs(), Env: env, Image: srv.GetImage()}
		if old != nil {
			if old.equal(next) {
				return configChange{}, nil // nothing to restart for
			}
			c.MCP[i] = next
			return configChange{container: true, reason: "MCP server replaced", rebuild: false}, nil
		}
		c.MCP = append(c.MCP, next)
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

// keptEnv is an MCP server's environment as written: a value given as the
// redaction marker is the replaced server's value of that key — setting a
// value is the only way one gets in, and a read never gives one out.
func keptEnv(env map[string]string, old *MCPServer, group string) (map[string]string, error) {
	if len(env) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		if v == secret.Redacted {
			prev, ok := "", false
			if old != nil {
				prev, ok = old.Env[k]
			}
			if !ok {
				return nil, invalid("server.env."+k, "%q keeps the value group %q's server holds, but it holds none for %s: set the value", secret.Redacted, group, k)
			}
			v = prev
		}
		out[k] = v
	}
	return out, nil
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
