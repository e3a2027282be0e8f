// Package sessions is the runner's view of the agent sessions it hosts: for
// each one a directory (the agent's /workspace), the endpoints it gives its
// agent (endpoints.go: the agent gateway's unix socket first), an inbox, and
// an agent (a container or a process) started on demand, stopped when idle
// and woken by any push (lifecycle.go). It applies the server's pushes by
// kind (apply.go: a replay to delivery, a message or notice to the inbox,
// restart, start and stop to the lifecycle) and keeps each group's config as
// the server last gave it (config.go).
package sessions

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/metrics"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Config configures the manager.
type Config struct {
	DataDir string
	Runtime rt.Runtime
	// AgentBase is the agent image (docker) or binary (process) of groups
	// that name no base image of their own.
	AgentBase string
	AgentEnv  map[string]string
	// DefaultCPUs and DefaultMemory cap the agents of groups that set no cap
	// of their own ("" = no limit); a group's own value wins, field by field.
	DefaultCPUs, DefaultMemory string
	Conn                       grpc.ClientConnInterface
	Engine                     *delivery.Engine
	Gateway                    gateway.Options // Known is required; OnActivity is set per session
	// OnGroup is told every group config read (the runner hosts the
	// group's MCP servers as it names them).
	OnGroup func(*guardv1.Group)
	// OnToolsChanged is told of the server's TOOLS_CHANGED notice to a
	// group's session: the settings of its guarded MCP tools changed.
	OnToolsChanged func(group string)
	Metrics        *metrics.Metrics
	Log            *slog.Logger
	// Egress serves each session's way out (nil: its agent has none);
	// EgressPolicy learns the runner's own listeners it makes.
	Egress       *egress.Proxy
	EgressPolicy *egress.AddressPolicy
	// Models is the model gateway on the egress socket (nil: none): a
	// session's token is minted as its egress is served and forgotten when
	// it closes.
	Models *modelgw.Gateway
	// AckDeadline is how long an agent may hold inbox items without
	// acknowledging anything before it is restarted (LivenessLoop; default
	// 5m).
	AckDeadline time.Duration
}

// Manager holds the runner's sessions.
type Manager struct {
	cfg Config
	reg guardv1.RegistryClient
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*Session
	groups   map[string]*guardv1.Group                // last config read per group
	dests    map[string][]*guardv1.SessionDestination // and its destinations
	retrying sync.Map                                 // push id → the agent was told its replay waits
	images   map[string]string                        // last image built per group

	// fenced: the runner could not renew its lease in time, so its agents
	// are stopped and none may start (Fence, Unfence).
	fenced  atomic.Bool
	fenceMu sync.Mutex
	stopped []string // sessions whose agents the fence stopped
}

// Session is one hosted session.
type Session struct {
	ID, GroupID string
	// Dir is the agent's workspace; Socket the gateway's host socket.
	Dir, Socket string
	Inbox       *gateway.Inbox
	// endpoints are what the session gives its agent, as the runtimes take
	// them; stops stop serving them.
	endpoints  []rt.Endpoint
	stops      []io.Closer
	egressAddr string       // process runtime: the loopback forwarder to its egress socket
	modelToken string       // its agent's key to the model gateway, while its egress is served
	lastActive atomic.Int64 // unix nanos
	version    atomic.Int64 // config version of the running image
	// frozen: a freeze stopped the agent; it does not start until the
	// server's StartSession (frozenPath keeps it across a runner restart).
	frozen atomic.Bool
}

func (s *Session) touch() { s.lastActive.Store(time.Now().UnixNano()) }

// delivery is the session as the delivery engine names it.
func (s *Session) delivery() delivery.Session { return delivery.Session{ID: s.ID, GroupID: s.GroupID} }

// New returns a manager.
func New(cfg Config) *Manager {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Manager{cfg: cfg, reg: guardv1.NewRegistryClient(cfg.Conn), log: cfg.Log.With("component", "sessions"),
		sessions: map[string]*Session{}, groups: map[string]*guardv1.Group{}, images: map[string]string{},
		dests: map[string][]*guardv1.SessionDestination{}}
}

// Get returns a known session.
func (m *Manager) Get(id string) *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[id]
}

// List returns the known sessions.
func (m *Manager) List() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	return out
}

// Ensure sets up a session's directory, inbox and endpoints (once).
func (m *Manager) Ensure(id, group string) (*Session, error) {
	if !rt.ValidID(id) || !rt.ValidID(group) {
		return nil, fmt.Errorf("session %q of group %q: invalid id", id, group)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok {
		if s.GroupID != group {
			return nil, fmt.Errorf("session %s belongs to group %s, not %s", id, s.GroupID, group)
		}
		return s, nil
	}
	// The inbox lives outside the session dir (which the agent can write).
	inbox, err := gateway.OpenInbox(inboxPath(m.cfg.DataDir, group, id), 0)
	if err != nil {
		return nil, err
	}
	s := &Session{ID: id, GroupID: group, Dir: filepath.Join(m.cfg.DataDir, "sessions", id), Inbox: inbox}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		inbox.Close()
		return nil, fmt.Errorf("session dir: %w", err)
	}
	if _, err := os.Stat(frozenPath(m.cfg.DataDir, id)); err == nil {
		s.frozen.Store(true)
	}
	if err := m.serve(s); err != nil {
		inbox.Close()
		return nil, err
	}
	s.touch()
	m.sessions[id] = s
	m.log.Info("session ready", "session", id, "group", group, "socket", s.Socket)
	return s, nil
}

// forget stops serving a session the runner no longer hosts and drops it.
func (m *Manager) forget(s *Session) {
	s.closeEndpoints()
	s.Inbox.Close()
	m.mu.Lock()
	delete(m.sessions, s.ID)
	m.mu.Unlock()
}

func inboxPath(dataDir, group, session string) string {
	return filepath.Join(dataDir, "inbox", group, session+".log")
}

// frozenPath marks a frozen session, outside the session dir (which the
// agent can write).
func frozenPath(dataDir, session string) string {
	return filepath.Join(dataDir, "frozen", session)
}
