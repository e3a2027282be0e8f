package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// A session's agent from start to stop: started on demand (Open, Wake),
// restarted on a new config, frozen and thawed, stopped when idle, released
// when the server moved the session away, stopped with the runner.

// ErrFrozen: the session's agent is frozen and does not start until the
// server lifts the freeze (a StartSession push).
var ErrFrozen = errors.New("the session is frozen")

// ErrFenced refuses to start an agent while the runner's lease is not
// renewed: its session may already be another runner's.
var ErrFenced = errors.New("the runner's lease is not renewed: no agent may run until it is")

// Open sets up a session the server just opened on this runner and starts
// its agent with the group (and config) OpenSession returned.
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
	return s, m.start(ctx, s, m.fetch(ctx, s))
}

// Wake starts the session's agent unless it is running, on the group's
// config as last read (config.go).
func (m *Manager) Wake(ctx context.Context, s *Session) error {
	return m.start(ctx, s, m.known(ctx, s))
}

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
	spec, err := m.spec(ctx, s, m.fetch(ctx, s), out)
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
// built); the whole output is kept for the agent at rt.BuildLogFile in its
// workspace.
func (m *Manager) RestartSession(ctx context.Context, ds delivery.Session, _ bool) (string, error) {
	s, err := m.Ensure(ds.ID, ds.GroupID)
	if err != nil {
		return "", err
	}
	var out rt.BuildLog
	err = m.restart(ctx, s, &out)
	if out.Len() > 0 {
		if werr := out.Keep(s.Dir); werr != nil {
			m.log.Warn("keep build output", "session", s.ID, "err", werr)
		}
	}
	return out.Summary(15), err
}

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
	if m.cfg.Egress != nil {
		// Its connections out are cut at once, before the agent is stopped.
		m.cfg.Egress.Cut(s.ID, "frozen: "+reason)
	}
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

// hostedHere asks the server whether this runner still hosts a session
// (GetSessionConfig: the runner's own read, whatever the agent's
// cli_scope). Only a definite "not yours" (PermissionDenied or NotFound)
// is false; any other answer keeps the session.
func (m *Manager) hostedHere(ctx context.Context, id string) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := m.reg.GetSessionConfig(actx, &guardv1.GetSessionConfigRequest{SessionId: id})
	c := status.Code(err)
	return c != codes.PermissionDenied && c != codes.NotFound, err
}

// Reconcile forgets the sessions this runner no longer hosts (the server
// reassigned them while its lease was lost): their agents are stopped and
// their endpoints closed.
func (m *Manager) Reconcile(ctx context.Context) {
	for _, s := range m.List() {
		hosted, err := m.hostedHere(ctx, s.ID)
		if hosted {
			continue
		}
		m.log.Warn("session no longer hosted here; releasing it", "session", s.ID, "err", err)
		if err := m.cfg.Runtime.Stop(ctx, s.ID); err != nil {
			m.log.Warn("stop released session", "session", s.ID, "err", err)
			continue
		}
		m.forget(s)
	}
	m.countRunning()
}

// Shutdown stops every agent and closes the endpoints.
func (m *Manager) Shutdown(ctx context.Context) {
	for _, s := range m.List() {
		if err := m.cfg.Runtime.Stop(ctx, s.ID); err != nil {
			m.log.Warn("stop session", "session", s.ID, "err", err)
		}
		s.closeEndpoints()
	}
	m.countRunning()
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
		waiting := m.waitingIn(f)
		if waiting == 0 {
			continue
		}
		if hosted, err := m.hostedHere(ctx, id); !hosted {
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

// waitingIn is how many items an inbox log holds (0 when unreadable: logged).
func (m *Manager) waitingIn(path string) int {
	in, err := gateway.OpenInbox(path, 0)
	if err != nil {
		m.log.Warn("resume: unreadable inbox", "file", path, "err", err)
		return 0
	}
	defer in.Close()
	return in.Len()
}
