package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"time"

	"github.com/clawguard/clawguard/proto/agentenv"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// ErrImageBuild marks a group image that did not build.
var ErrImageBuild = errors.New("image build failed")

// A group's config is read when it changes, not on every push: the server
// pushes a restart to every active session of a group whose container
// config changed (packages, MCP servers, limits, base image), and a restart
// reads it again (fetch); a start, a wake or a replay uses the config last
// read (known), and reads it only when there is none.

// known is the session's group config as last read, read now when none was.
func (m *Manager) known(ctx context.Context, s *Session) *guardv1.Group {
	m.mu.Lock()
	g := m.groups[s.GroupID]
	m.mu.Unlock()
	if g != nil {
		return g
	}
	return m.fetch(ctx, s)
}

// fetch reads the session's group and current config with GetSessionConfig:
// the runner's own (infrastructure) read, not the agent's, so it works for a
// cli_scope=disabled group too. When the read fails the last config read (or
// none: no packages, no limits) is used and a warning logged.
func (m *Manager) fetch(ctx context.Context, s *Session) *guardv1.Group {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := m.reg.GetSessionConfig(actx, &guardv1.GetSessionConfigRequest{SessionId: s.ID})
	if g := resp.GetGroup(); err == nil && g.GetId() == s.GroupID {
		m.remember(g)
		return g
	}
	if err == nil {
		err = fmt.Errorf("server answered group %q", resp.GetGroup().GetId())
	}
	m.log.Warn("could not read the session's group config; using the last one read", "session", s.ID, "group", s.GroupID, "err", err)
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.groups[s.GroupID]; g != nil {
		return g
	}
	return &guardv1.Group{Id: s.GroupID, Config: &guardv1.GroupConfig{}}
}

// fallback keeps a group's config for when GetSessionConfig cannot be read,
// unless one was read already; it hosts no MCP server (its secrets are
// redacted: only GetSessionConfig's config is handed to OnGroup).
func (m *Manager) fallback(g *guardv1.Group) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groups[g.GetId()] == nil {
		m.groups[g.GetId()] = g
	}
}

// remember keeps a group's config as the last one read.
func (m *Manager) remember(g *guardv1.Group) {
	m.mu.Lock()
	m.groups[g.GetId()] = g
	m.mu.Unlock()
	if m.cfg.OnGroup != nil {
		m.cfg.OnGroup(g)
	}
}

// spec builds the session's run spec from its group's config.
func (m *Manager) spec(ctx context.Context, s *Session, g *guardv1.Group, out io.Writer) (rt.SessionSpec, error) {
	cfg := g.GetConfig()
	base := m.cfg.AgentBase
	if m.cfg.Runtime.Name() == "docker" && g.GetBaseImage() != "" {
		base = g.GetBaseImage()
	}
	img := rt.GroupImageSpec{
		GroupID: s.GroupID, ConfigVersion: cfg.GetVersion(), BaseImage: base,
		AptPackages: cfg.GetAptPackages(), NpmPackages: cfg.GetNpmPackages(), Output: out,
	}
	// The group's MCP servers are not the container's: the runner hosts
	// them (mcphost), so neither their commands nor their secrets reach it.
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return rt.SessionSpec{}, fmt.Errorf("session dir: %w", err)
	}
	if err := rt.WriteInstructions(s.Dir, g.GetInstructions()); err != nil {
		return rt.SessionSpec{}, fmt.Errorf("session %s: %w", s.ID, err)
	}
	spec := rt.SessionSpec{
		SessionID: s.ID, AgentGroupID: s.GroupID, Env: m.agentEnv(g), AgentCommand: cfg.GetAgentCommand(),
		SessionDir: s.Dir, Endpoints: s.endpoints,
		CPUs: orDefault(cfg.GetCpus(), m.cfg.DefaultCPUs), Memory: orDefault(cfg.GetMemory(), m.cfg.DefaultMemory),
	}
	image, err := m.cfg.Runtime.BuildGroupImage(ctx, img)
	if err != nil {
		// The spec without an image: a start may fall back to the last one built.
		return spec, fmt.Errorf("group %s image: %w: %w", s.GroupID, ErrImageBuild, err)
	}
	m.mu.Lock()
	m.images[s.GroupID] = image
	m.mu.Unlock()
	s.version.Store(cfg.GetVersion())
	spec.Image = image
	return spec, nil
}

// lastImage is the group's image last built successfully ("" when none).
func (m *Manager) lastImage(group string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.images[group]
}

// agentEnv is the agent's own environment: the runner's --agent-env, then
// the group's (a group's value wins; the runner's own variables are never
// a group's to set, the server refuses them and they are skipped here).
func (m *Manager) agentEnv(g *guardv1.Group) map[string]string {
	env := maps.Clone(m.cfg.AgentEnv)
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range g.GetConfig().GetAgentEnv() {
		if agentenv.Reserved(k) {
			m.log.Warn("a group's agent variable the runner owns was not set", "group", g.GetId(), "variable", k)
			continue
		}
		env[k] = v
	}
	return env
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
