package sessions

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/clawguard/clawguard/runner/internal/gateway"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Endpoint is one thing a session gives its agent: a unix socket the runner
// serves for that session alone. A container has no network, so these are
// its only ways out: the docker runtime mounts each socket into it, the
// process runtime names it by its host path.
type Endpoint struct {
	// Name names it and its socket file, <data-dir>/sockets/<session>.<name>.sock
	// (the gateway's is <session>.sock).
	Name string
	// ContainerSocket is where the socket appears in the agent's container.
	ContainerSocket string
	// Env is what tells the agent where it is, given the socket's path as
	// the agent sees it (ContainerSocket in a container, the host path for
	// a process), once the session is served (a token it minted).
	Env func(s *Session, socket string) map[string]string
	// HostEnv, when set, is the variables a host process gets instead of
	// Env(host path) (an endpoint whose host side is not its socket).
	HostEnv func(s *Session, socket string) map[string]string
	// Serve starts serving the session on a fresh socket at path; closing
	// what it returns stops serving and removes the socket.
	Serve func(s *Session, path string) (io.Closer, error)
}

// endpoints is what every session gives its agent, declared here once: the
// runtimes mount and set exactly this list (rt.SessionSpec.Endpoints), each
// is served from the session's set-up (Ensure) until it is released or the
// runner stops, and runner/README.md ("What a session gives its agent")
// lists it. The agent gateway comes first. A new capability (an egress
// proxy, a model endpoint) is one more entry: its name, where its socket
// appears in the container, its variables and its Serve — handed in
// through Config like the gateway's options — and nothing else changes.
func (m *Manager) endpoints() []Endpoint {
	out := []Endpoint{m.gatewayEndpoint()}
	if m.cfg.Egress != nil {
		out = append(out, m.egressEndpoint())
	}
	return out
}

// gatewayEndpoint is the agent gateway (agent.v1.AgentGateway): actions
// sent, the inbox read and acknowledged.
func (m *Manager) gatewayEndpoint() Endpoint {
	return Endpoint{
		Name:            "gateway",
		ContainerSocket: rt.ContainerGatewaySocket,
		Env: func(_ *Session, socket string) map[string]string {
			return map[string]string{rt.EnvGatewaySocket: socket}
		},
		Serve: func(s *Session, path string) (io.Closer, error) {
			opts := m.cfg.Gateway
			opts.OnActivity = s.touch
			opts.Log = m.log
			gw, err := gateway.Listen(path, s.delivery(), m.cfg.Engine, s.Inbox, opts)
			if err != nil {
				return nil, err
			}
			s.Socket = path
			return closer(gw.Close), nil
		},
	}
}

// closer is a Close that cannot fail as an io.Closer.
type closer func()

func (c closer) Close() error { c(); return nil }

// serve starts every endpoint of a session; on a failure none is left
// serving.
func (m *Manager) serve(s *Session) error {
	// The sockets' directory must be traversable by the agent's non-root user.
	dir := filepath.Join(m.cfg.DataDir, "sockets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("socket dir: %w", err)
	}
	for _, e := range m.endpoints() {
		path := filepath.Join(dir, s.ID+"."+e.Name+".sock")
		if e.Name == "gateway" {
			path = filepath.Join(dir, s.ID+".sock")
		}
		stop, err := e.Serve(s, path)
		if err != nil {
			s.closeEndpoints()
			return fmt.Errorf("session %s: serve its %s: %w", s.ID, e.Name, err)
		}
		s.stops = append(s.stops, stop)
		hostEnv := e.Env(s, path)
		if e.HostEnv != nil {
			hostEnv = e.HostEnv(s, path)
		}
		s.endpoints = append(s.endpoints, rt.Endpoint{Name: e.Name, HostSocket: path, ContainerSocket: e.ContainerSocket,
			ContainerEnv: e.Env(s, e.ContainerSocket), HostEnv: hostEnv})
	}
	return nil
}

// closeEndpoints stops serving the session's endpoints (once its agent is
// gone: a container keeps the socket files it was started with).
func (s *Session) closeEndpoints() error {
	var errs []error
	for _, c := range s.stops {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
