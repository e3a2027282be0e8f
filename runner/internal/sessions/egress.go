package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"

	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/forward"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// The session's way out (issue 43): its egress socket, served by the
// runner's egress proxy (runner/internal/egress), mounted into the
// container where clawguard-init forwards the container's loopback to it.
// The agent finds it through the usual proxy variables. The same socket
// serves the model gateway (issue 44, runner/internal/modelgw): the model
// base URLs name the same forwarder, and the session's token is the SDKs'
// key.

// ContainerEgressListen is where clawguard-init listens in a container.
const ContainerEgressListen = "127.0.0.1:3128"

// egressEnv is what points the usual clients at the way out (listen:
// host:port of the loopback forwarder; socket: where clawguard-init finds
// the socket, "" outside a container).
func egressEnv(listen, socket string) map[string]string {
	url := "http://" + listen
	env := map[string]string{
		"HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
		"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
		"NODE_USE_ENV_PROXY": "1",
	}
	if socket != "" {
		env[rt.EnvEgressSocket] = socket
		env[rt.EnvEgressListen] = listen
	}
	return env
}

// egressEndpoint is the session's way out, and its model endpoint.
func (m *Manager) egressEndpoint() Endpoint {
	return Endpoint{
		Name:            "egress",
		ContainerSocket: rt.ContainerEgressSocket,
		Env: func(s *Session, socket string) map[string]string {
			return withModels(egressEnv(ContainerEgressListen, socket), ContainerEgressListen, s)
		},
		HostEnv: func(s *Session, _ string) map[string]string {
			return withModels(egressEnv(s.egressAddr, ""), s.egressAddr, s)
		},
		Serve: m.serveEgress,
	}
}

// withModels adds the model gateway's variables to env: its base URLs at
// the forwarder's listen address, the session's token as each SDK's key.
func withModels(env map[string]string, listen string, s *Session) map[string]string {
	if s.modelToken == "" {
		return env
	}
	maps.Copy(env, modelgw.Env("http://"+listen, s.modelToken))
	return env
}

// serveEgress serves the session's egress socket; under the process
// runtime also a loopback listener forwarding to it (the host process's
// HTTPS_PROXY: advisory, a process can ignore it).
func (m *Manager) serveEgress(s *Session, path string) (io.Closer, error) {
	if len(path) > 100 {
		return nil, fmt.Errorf("egress socket path %q is too long for a unix socket (max ~100 bytes); use a shorter --data-dir", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil { // the agent's non-root user connects
		ln.Close()
		return nil, err
	}
	es := egress.Session{ID: s.ID, GroupID: s.GroupID}
	if m.cfg.Models != nil {
		s.modelToken = m.cfg.Models.Open(s.ID)
	}
	m.cfg.Egress.Serve(es, ln)
	stop := func() {
		m.cfg.Egress.Stop(s.ID, "the session's endpoints closed")
		if m.cfg.Models != nil {
			m.cfg.Models.Close(s.ID)
		}
		os.Remove(path)
	}
	if m.cfg.Runtime.Name() != "process" {
		return closer(stop), nil
	}
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return nil, err
	}
	s.egressAddr = fl.Addr().String()
	// The runner's own listener: never a destination (a loop).
	if ap, err := netip.ParseAddrPort(s.egressAddr); err == nil && m.cfg.EgressPolicy != nil {
		m.cfg.EgressPolicy.AddOwnEndpoints(ap)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go (&forward.Forwarder{Listener: fl, Socket: path, Log: m.log}).Serve(ctx)
	return closer(func() { cancel(); fl.Close(); stop() }), nil
}
