// Package sessions is the runner's view of the agent sessions it hosts: for
// each one a directory (the agent's /workspace), an agent gateway on its own
// unix socket, an inbox, and a container (or process) started on demand,
// stopped when idle and woken by any push. It also applies the server's
// pushes (connect.Applier).
package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/metrics"
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
	Metrics *metrics.Metrics
	Log     *slog.Logger
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
	groups   map[string]*guardv1.Group // last config read per group
	retrying sync.Map                  // push id → the agent was told its replay waits
	images   map[string]string         // last image built per group

	// fenced: the runner could not renew its lease in time, so its agents
	// are stopped and none may start (Fence, Unfence).
	fenced  atomic.Bool
	fenceMu sync.Mutex
	stopped []string // sessions whose agents the fence stopped
}

// Session is one hosted session.
type Session struct {
	ID, GroupID string
	Dir, Socket string
	Inbox       *gateway.Inbox
	gw          *gateway.Gateway
	lastActive  atomic.Int64 // unix nanos
	version     atomic.Int64 // config version of the running image
	// frozen: a freeze stopped the agent; it does not start until the
	// server's StartSession (frozenPath keeps it across a runner restart).
	frozen atomic.Bool
}

func (s *Session) touch() { s.lastActive.Store(time.Now().UnixNano()) }

// New returns a manager.
func New(cfg Config) *Manager {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Manager{cfg: cfg, reg: guardv1.NewRegistryClient(cfg.Conn), log: cfg.Log.With("component", "sessions"),
		sessions: map[string]*Session{}, groups: map[string]*guardv1.Group{}, images: map[string]string{}}
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

// Ensure sets up a session's directory, inbox and gateway (once).
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
	s := &Session{
		ID: id, GroupID: group,
		Dir:    filepath.Join(m.cfg.DataDir, "sessions", id),
		Socket: filepath.Join(m.cfg.DataDir, "sockets", id+".sock"),
		Inbox:  inbox,
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("session dir: %w", err)
	}
	if _, err := os.Stat(frozenPath(m.cfg.DataDir, id)); err == nil {
		s.frozen.Store(true)
	}
	// The socket's directory must be traversable by the agent's non-root user.
	if err := os.MkdirAll(filepath.Dir(s.Socket), 0o755); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	opts := m.cfg.Gateway
	opts.OnActivity = s.touch
	opts.Log = m.log
	gw, err := gateway.Listen(s.Socket, delivery.Session{ID: id, GroupID: group}, m.cfg.Engine, s.Inbox, opts)
	if err != nil {
		return nil, err
	}
	s.gw = gw
	s.touch()
	m.sessions[id] = s
	m.log.Info("session ready", "session", id, "group", group, "socket", s.Socket)
	return s, nil
}

// frozenPath marks a frozen session, outside the session dir (which the
// agent can write).
func frozenPath(dataDir, session string) string {
	return filepath.Join(dataDir, "frozen", session)
}

// ErrFrozen: the session's agent is frozen and does not start until the
// server lifts the freeze (a StartSession push).
var ErrFrozen = errors.New("the session is frozen")

// freeze stops the session's agent and keeps it from starting: the marker
// first, so a crash between the two leaves it frozen, not running.
func (m *Manager) freeze(ctx context.Context, s *Session, reason string) error {
	if err := os.MkdirAll(filepath.Dir(frozenPath(m.cfg.DataDir, s.ID)), 0o700); err != nil {
		return fmt.Errorf("freeze %s: %w", s.ID, err)
	}
	if err := os.WriteFile(frozenPath(m.cfg.DataDir, s.ID), []byte(reason+"\n"), 0o600); err != nil {
		return fmt.Errorf("freeze %s: %w", s.ID, err)
	}
	s.frozen.Store(true)
	if err := m.cfg.Runtime.Stop(ctx, s.ID); err != nil {
		return fmt.Errorf("freeze %s: stop the agent: %w", s.ID, err)
	}
	m.countRunning()
	m.log.Info("agent stopped: frozen", "session", s.ID, "reason", reason)
	return nil
}

// thaw lets the session's agent start again.
func (m *Manager) thaw(s *Session) error {
	if err := os.Remove(frozenPath(m.cfg.DataDir, s.ID)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("unfreeze %s: %w", s.ID, err)
	}
	s.frozen.Store(false)
	return nil
}

// wakeKept wakes the session for an item kept in its inbox: a frozen
// agent keeps it there (the push is done: nothing is lost) until thawed.
func (m *Manager) wakeKept(ctx context.Context, s *Session) error {
	if err := m.Wake(ctx, s); err != nil && !errors.Is(err, ErrFrozen) {
		return err
	}
	return nil
}

func inboxPath(dataDir, group, session string) string {
	return filepath.Join(dataDir, "inbox", group, session+".log")
}

// Resume picks up, after a restart, the sessions whose durable inbox still
// holds items the agent has not taken: each one this runner still hosts is
// set up again and its agent started, so it gets them. Sessions the server
// moved away while the runner was down are left (their items are logged).
func (m *Manager) Resume(ctx context.Context) {
	files, _ := filepath.Glob(filepath.Join(m.cfg.DataDir, "inbox", "*", "*.log"))
	for _, f := range files {
		group := filepath.Base(filepath.Dir(f))
		id := strings.TrimSuffix(filepath.Base(f), ".log")
		if !rt.ValidID(id) || !rt.ValidID(group) || m.Get(id) != nil {
			continue
		}
		in, err := gateway.OpenInbox(f, 0)
		if err != nil {
			m.log.Warn("resume: unreadable inbox", "file", f, "err", err)
			continue
		}
		waiting := in.Len()
		in.Close()
		if waiting == 0 {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = m.reg.GetSessionConfig(actx, &guardv1.GetSessionConfigRequest{SessionId: id})
		cancel()
		if c := status.Code(err); c == codes.PermissionDenied || c == codes.NotFound {
			m.log.Warn("resume: session moved away with items its agent never took", "session", id, "waiting", waiting, "err", err)
			continue
		}
		s, err := m.Ensure(id, group)
		if err != nil {
			m.log.Warn("resume: could not set up the session", "session", id, "err", err)
			continue
		}
		if err := m.Wake(ctx, s); err != nil {
			m.log.Warn("resume: could not start the agent", "session", id, "err", err)
			continue
		}
		m.log.Info("resumed a session with items waiting for its agent", "session", id, "waiting", waiting)
	}
}

// Notify puts a notice into a session's inbox (delivery.Notifier).
func (m *Manager) Notify(sessionID string, n *agentv1.Notice) {
	s := m.Get(sessionID)
	if s == nil {
		m.log.Warn("notice for an unknown session dropped", "session", sessionID, "text", n.GetText())
		return
	}
	s.Inbox.Notice(n)
	s.touch()
}

// NotifyOnce puts a notice about one event into a session's inbox unless
// the inbox already holds or gave one with that key (delivery.Notifier).
func (m *Manager) NotifyOnce(sessionID, key string, n *agentv1.Notice) {
	s := m.Get(sessionID)
	if s == nil {
		m.log.Warn("notice for an unknown session dropped", "session", sessionID, "text", n.GetText())
		return
	}
	s.Inbox.PushOnce(key, &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}})
	s.touch()
}

// Open sets up a session the server just opened on this runner and starts
// its agent with its group's current config.
func (m *Manager) Open(ctx context.Context, sess *guardv1.Session, g *guardv1.Group) (*Session, error) {
	s, err := m.Ensure(sess.GetId(), sess.GetAgentGroupId())
	if err != nil {
		return nil, err
	}
	// The config is read with GetSessionConfig, the one answer that carries
	// the group's MCP server environment (OpenSession's is redacted); g is
	// the fallback when that read fails.
	if g.GetId() == s.GroupID {
		m.fallback(g)
	}
	return s, m.start(ctx, s, m.group(ctx, s))
}

// Wake starts the session's agent unless it is running.
func (m *Manager) Wake(ctx context.Context, s *Session) error {
	return m.start(ctx, s, m.group(ctx, s))
}

// ErrFenced refuses to start an agent while the runner's lease is not
// renewed: its session may already be another runner's.
var ErrFenced = errors.New("the runner's lease is not renewed: no agent may run until it is")

func (m *Manager) start(ctx context.Context, s *Session, g *guardv1.Group) error {
	if m.fenced.Load() {
		return fmt.Errorf("start session %s: %w", s.ID, ErrFenced)
	}
	if s.frozen.Load() {
		return fmt.Errorf("start session %s: %w", s.ID, ErrFrozen)
	}
	spec, err := m.spec(ctx, s, g, nil)
	if err != nil {
		// A group image that does not build (an approved package that fails
		// to install) must not keep the agent from starting: it starts on the
		// last image that did. The failure was reported when it happened.
		last := m.lastImage(s.GroupID)
		if last == "" || spec.SessionID == "" {
			return err
		}
		m.log.Warn("group image does not build; starting on the last one that did", "session", s.ID, "image", last, "err", err)
		spec.Image = last
	}
	h, err := m.cfg.Runtime.Start(ctx, spec)
	m.spawned(h, err)
	if err != nil {
		return fmt.Errorf("start session %s: %w", s.ID, err)
	}
	if err := m.unlessFenced(ctx, s); err != nil {
		return err
	}
	if !h.Reused {
		s.Inbox.Restarted()
	}
	s.touch()
	return nil
}

// unlessFenced stops an agent that started while the fence went up (the
// fence stops what it finds running; this one may have come after).
func (m *Manager) unlessFenced(ctx context.Context, s *Session) error {
	if !m.fenced.Load() {
		return nil
	}
	if err := m.cfg.Runtime.Stop(ctx, s.ID); err != nil {
		m.log.Error("agent started as the lease fence went up and could not be stopped", "session", s.ID, "err", err)
	}
	return fmt.Errorf("start session %s: %w", s.ID, ErrFenced)
}

// Restart restarts the session's agent on its group's current config (the
// image is rebuilt when the config changed; building an identical image is a
// no-op).
func (m *Manager) Restart(ctx context.Context, s *Session) error {
	return m.restart(ctx, s, nil)
}

// restart rebuilds (writing the build's output to out) and restarts. A
// build that fails leaves the running agent as it is.
func (m *Manager) restart(ctx context.Context, s *Session, out io.Writer) error {
	if m.fenced.Load() {
		return fmt.Errorf("restart session %s: %w", s.ID, ErrFenced)
	}
	spec, err := m.spec(ctx, s, m.group(ctx, s), out)
	if err != nil {
		return err
	}
	h, err := m.cfg.Runtime.Restart(ctx, spec)
	m.spawned(h, err)
	if err != nil {
		return fmt.Errorf("restart session %s: %w", s.ID, err)
	}
	if err := m.unlessFenced(ctx, s); err != nil {
		return err
	}
	s.Inbox.Restarted()
	s.touch()
	return nil
}

// RestartSession is Restart by delivery session (for the handlers). It
// returns the last lines of the image build's output (none when nothing was
// built); the whole output is kept for the agent at BuildLogFile in its
// workspace.
func (m *Manager) RestartSession(ctx context.Context, ds delivery.Session, _ bool) (string, error) {
	s, err := m.Ensure(ds.ID, ds.GroupID)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = m.restart(ctx, s, &limitedWriter{w: &out, n: maxBuildLog})
	if out.Len() > 0 {
		if werr := writeFile(filepath.Join(s.Dir, BuildLogFile), out.Bytes()); werr != nil {
			m.log.Warn("keep build output", "session", s.ID, "err", werr)
		}
	}
	return lastLines(out.String(), 15), err
}

// builderNoise are the image builder's own bookkeeping lines: left out of the
// summary so its last lines are what the install printed.
var ansiColour = regexp.MustCompile("\x1b\\[[0-9;]*m")

var builderNoise = regexp.MustCompile(`^(-*> ([0-9a-f]+$|Running in )|Removing intermediate container |Step \d+/\d+ : (LABEL|COPY|FROM|USER) |Successfully built )`)

// BuildLogFile is where, relative to the workspace, the agent finds the
// output of its group image's last build made for an approved change.
const BuildLogFile = ".clawguard/build.log"

const maxBuildLog = 1 << 20

// limitedWriter keeps the first n bytes and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	k := min(len(p), l.n)
	l.n -= k
	if _, err := l.w.Write(p[:k]); err != nil {
		return 0, err
	}
	return len(p), nil
}

func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		// As a terminal shows it: colours dropped, a line redrawn after \r
		// (progress counters) is its last state.
		l = ansiColour.ReplaceAllString(l, "")
		if i := strings.LastIndex(strings.TrimRight(l, "\r"), "\r"); i >= 0 {
			l = l[i+1:]
		}
		if l = strings.TrimSpace(l); l != "" && !builderNoise.MatchString(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// OnWake puts a system message into a session's inbox for the agent that
// starts next (handlers.Deps.OnWake): the inbox outlives the container, so
// the restarted agent reads it first thing.
// The id names the one applied action, so the agent gets it once.
func (m *Manager) OnWake(ds delivery.Session, id, text string) {
	s := m.Get(ds.ID)
	if s == nil {
		m.log.Warn("on_wake for an unknown session dropped", "session", ds.ID)
		return
	}
	s.Inbox.PushOnce(id, &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{
		Id: id, SenderUserId: SystemSender, Text: text, At: timestamppb.Now()}}})
	s.touch()
}

// SystemSender is the sender of the runner's own messages to an agent.
const SystemSender = "system:clawguard"

func (m *Manager) spawned(h rt.Handle, err error) {
	if m.cfg.Metrics == nil || h.Reused {
		return
	}
	if err != nil {
		m.cfg.Metrics.ContainerSpawnsTotal.WithLabelValues("failed").Inc()
	} else {
		m.cfg.Metrics.ContainerSpawnsTotal.WithLabelValues("ok").Inc()
	}
	m.countRunning()
}

func (m *Manager) countRunning() {
	if m.cfg.Metrics == nil {
		return
	}
	if ids, err := m.cfg.Runtime.Running(context.Background()); err == nil {
		m.cfg.Metrics.ContainersRunning.Set(float64(len(ids)))
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
		SessionID: s.ID, AgentGroupID: s.GroupID, Env: m.cfg.AgentEnv,
		SessionDir: s.Dir, GatewaySocket: s.Socket,
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

// ErrImageBuild marks a group image that did not build.
var ErrImageBuild = errors.New("image build failed")

// lastImage is the group's image last built successfully ("" when none).
func (m *Manager) lastImage(group string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.images[group]
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// group reads the session's group and current config with GetSessionConfig:
// the runner's own (infrastructure) read, not the agent's, so it works for a
// cli_scope=disabled group too. When the read fails the last config read (or
// none: no packages, no limits) is used and a warning logged.
func (m *Manager) group(ctx context.Context, s *Session) *guardv1.Group {
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

// Apply applies one server push (connect.Applier). Any push wakes a stopped
// session.
func (m *Manager) Apply(ctx context.Context, p *guardv1.Push) error {
	if m.fenced.Load() {
		// Nothing is taken while the session may be another runner's; the
		// push is applied once the lease is renewed (or goes to the new host).
		return connect.Retry(ErrFenced)
	}
	s, err := m.Ensure(p.GetSessionId(), p.GetAgentGroupId())
	if err != nil {
		return err
	}
	ds := delivery.Session{ID: s.ID, GroupID: s.GroupID}
	switch b := p.GetBody().(type) {
	case *guardv1.Push_Replay:
		if err := m.Wake(ctx, s); err != nil {
			m.log.Warn("replay: could not wake the session", "session", s.ID, "err", err)
		}
		out := m.cfg.Engine.Replay(ctx, ds, b.Replay)
		if out.Undecided {
			// Not a final answer (the guard or the database could not be
			// reached): the push is tried again, never acknowledged as done.
			if _, told := m.retrying.LoadOrStore(p.GetId(), true); !told {
				m.Notify(s.ID, &agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_INFO, HoldId: b.Replay.GetHoldId(),
					Text: out.Reason + "; it will be tried again", At: timestamppb.Now()})
			}
			return connect.Retry(fmt.Errorf("replay of hold %s not done yet: %s", b.Replay.GetHoldId(), out.Reason))
		}
		m.retrying.Delete(p.GetId())
		if out.NotHosted {
			// The session moved: its new host replays it. Reported as not
			// applied, so a push still ours (the move not yet committed) is
			// sent again rather than counted done.
			return fmt.Errorf("replay of hold %s refused here, the session is hosted elsewhere: %s", b.Replay.GetHoldId(), out.Reason)
		}
		m.log.Info("replayed approved action", "session", s.ID, "hold", b.Replay.GetHoldId(),
			"action", b.Replay.GetDeliveryAction(), "status", out.Status.String(), "reason", out.Reason)
		return nil // applied: the grant is single-use; the agent was told the outcome
	case *guardv1.Push_Deliver:
		d := b.Deliver
		if err := m.keep(s, p.GetId(), &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{
			Id: d.GetMessageId(), FromAgentGroupId: d.GetFromAgentGroupId(), SenderUserId: d.GetSenderUserId(),
			Text: d.GetText(), Payload: d.GetPayload(), At: orNow(p.GetCreatedAt()),
		}}}); err != nil {
			return err
		}
		return m.wakeKept(ctx, s)
	case *guardv1.Push_Restart:
		if s.frozen.Load() {
			return nil // it starts on the group's config of then, once thawed
		}
		if v := b.Restart.GetConfigVersion(); v > 0 && b.Restart.GetRebuildImage() && v <= s.version.Load() {
			return nil // that config (or a newer one) is already running
		}
		if err := m.Restart(ctx, s); errors.Is(err, ErrImageBuild) {
			// The running agent is kept, and the failure was reported where
			// the change was applied; building the same config again and
			// again (a package that does not install) helps nobody.
			m.log.Warn("restart push: the group image does not build; the running agent is kept", "session", s.ID, "err", err)
			return nil
		} else if err != nil {
			return err
		}
		return nil
	case *guardv1.Push_Notify:
		n := b.Notify
		if err := m.keep(s, p.GetId(), &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: &agentv1.Notice{
			Kind: agentv1.NoticeKind(n.GetKind()), Text: n.GetText(), HoldId: n.GetHoldId(), At: orNow(p.GetCreatedAt()),
		}}}); err != nil {
			return err
		}
		return m.wakeKept(ctx, s)
	case *guardv1.Push_Start:
		// Also the end of a freeze: the server sends it when one is lifted.
		if err := m.thaw(s); err != nil {
			return err
		}
		return m.Wake(ctx, s)
	case *guardv1.Push_Stop:
		return m.freeze(ctx, s, b.Stop.GetReason())
	default:
		return errors.New("push with no body this runner understands")
	}
}

// keep puts a pushed item into the session's durable inbox: on disk before
// the push is acknowledged. A full inbox (the agent is not reading) is
// tried again later, so nothing the server handed over is dropped.
func (m *Manager) keep(s *Session, pushID string, item *agentv1.InboxResponse) error {
	err := s.Inbox.Durable(pushID, item)
	if errors.Is(err, gateway.ErrInboxFull) {
		return connect.Retry(err)
	}
	if err == nil {
		s.touch()
	}
	return err
}

func orNow(t *timestamppb.Timestamp) *timestamppb.Timestamp {
	if t == nil {
		return timestamppb.Now()
	}
	return t
}

// IdleLoop stops agents idle for idleFor, checking every interval.
func (m *Manager) IdleLoop(ctx context.Context, idleFor, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := m.cfg.Runtime.StopIdle(ctx, idleFor, func(id string) time.Time {
			if s := m.Get(id); s != nil {
				return time.Unix(0, s.lastActive.Load())
			}
			return time.Time{}
		})
		if err != nil {
			m.log.Warn("idle stop", "err", err)
		}
		if n > 0 {
			m.log.Info("stopped idle sessions", "count", n)
			m.countRunning()
		}
	}
}

// Reconcile forgets the sessions this runner no longer hosts (the server
// reassigned them while its lease was lost): their agents are stopped and
// their gateways closed. It asks with GetSessionConfig (the runner's own
// read, whatever the agent's cli_scope). Only a definite "not yours"
// (PermissionDenied or NotFound) releases a session; any other error keeps it.
func (m *Manager) Reconcile(ctx context.Context) {
	for _, s := range m.List() {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := m.reg.GetSessionConfig(actx, &guardv1.GetSessionConfigRequest{SessionId: s.ID})
		cancel()
		if c := status.Code(err); c != codes.PermissionDenied && c != codes.NotFound {
			continue
		}
		m.log.Warn("session no longer hosted here; releasing it", "session", s.ID, "err", err)
		if err := m.cfg.Runtime.Stop(ctx, s.ID); err != nil {
			m.log.Warn("stop released session", "session", s.ID, "err", err)
			continue
		}
		s.gw.Close()
		s.Inbox.Close()
		m.mu.Lock()
		delete(m.sessions, s.ID)
		m.mu.Unlock()
	}
	m.countRunning()
}

// Shutdown stops every agent and closes the gateways.
func (m *Manager) Shutdown(ctx context.Context) {
	for _, s := range m.List() {
		if err := m.cfg.Runtime.Stop(ctx, s.ID); err != nil {
			m.log.Warn("stop session", "session", s.ID, "err", err)
		}
		s.gw.Close()
	}
	m.countRunning()
}
