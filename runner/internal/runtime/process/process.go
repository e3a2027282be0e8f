// Package process runs each agent session as a plain child process of the
// runner. There is NO isolation: the agent has the runner's user, file system
// and network. It exists for laptops without Docker and for tests, and says
// so loudly when constructed.
//
// What it does keep: the agent gets only its own environment (nothing of the
// runner's, so no tokens leak), the session directory as working directory,
// its endpoints' variables pointing at their host sockets (the gateway's
// CLAWGUARD_GATEWAY_SOCKET first), its own process group
// (Stop signals the whole group) and a parent-death signal, so agents die
// with a crashed runner and there are never orphans to remove. CPU, memory
// and pids limits are not enforced (a warning is logged when configured).
package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Warning is logged when a process runtime is created.
const Warning = "process runtime: NO ISOLATION — agents run as host processes; for laptops and tests only"

// Config configures the process runtime.
type Config struct {
	InstallID   string        // for logs only
	StopTimeout time.Duration // grace between SIGTERM and SIGKILL; default 10s
	Logger      *slog.Logger
}

// Runtime is the process implementation of runtime.Runtime.
type Runtime struct {
	cfg   Config
	log   *slog.Logger
	locks rt.SessionLocks

	mu    sync.Mutex
	procs map[string]*proc
}

type proc struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed once the process has exited and been reaped
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

var _ rt.Runtime = (*Runtime)(nil)

// New returns a process runtime and logs the no-isolation warning.
func New(cfg Config) *Runtime {
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("runtime", "process", "install", cfg.InstallID)
	log.Warn(Warning)
	return &Runtime{cfg: cfg, log: log, procs: map[string]*proc{}}
}

func (r *Runtime) Name() string { return "process" }

func (r *Runtime) Start(ctx context.Context, spec rt.SessionSpec) (rt.Handle, error) {
	if err := spec.Validate(); err != nil {
		return rt.Handle{}, err
	}
	unlock := r.locks.Lock(spec.SessionID)
	defer unlock()
	return r.start(spec)
}

func (r *Runtime) start(spec rt.SessionSpec) (rt.Handle, error) {
	if p := r.get(spec.SessionID); p != nil && !p.exited() {
		return rt.Handle{SessionID: spec.SessionID, ID: strconv.Itoa(p.cmd.Process.Pid), Reused: true}, nil
	}
	if err := rt.CheckEndpoints(spec.Endpoints); err != nil {
		return rt.Handle{}, fmt.Errorf("start session %s: %w", spec.SessionID, err)
	}
	if err := os.MkdirAll(spec.SessionDir, 0o700); err != nil {
		return rt.Handle{}, fmt.Errorf("start session %s: session dir: %w", spec.SessionID, err)
	}
	if spec.CPUs != "" || spec.Memory != "" || spec.PidsLimit != 0 {
		r.log.Warn("process runtime does not enforce resource limits", "session", spec.SessionID,
			"cpus", spec.CPUs, "memory", spec.Memory, "pids_limit", spec.PidsLimit)
	}

	argv := append([]string{spec.Image}, spec.Command...)
	if len(spec.AgentCommand) > 0 { // the group's own command, instead of the agent binary
		argv = append(append([]string(nil), spec.AgentCommand...), spec.Command...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.SessionDir
	cmd.Env = environ(spec)
	log := r.log.With("session", spec.SessionID)
	cmd.Stdout = &lineLogger{log: log, stream: "stdout"}
	cmd.Stderr = &lineLogger{log: log, stream: "stderr"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second // a grandchild holding stdout open must not keep the session "running"
	if err := cmd.Start(); err != nil {
		return rt.Handle{}, fmt.Errorf("start session %s: %w", spec.SessionID, err)
	}
	p := &proc{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		log.Info("agent process exited", "pid", cmd.Process.Pid, "err", err)
		close(p.done)
	}()
	r.mu.Lock()
	r.procs[spec.SessionID] = p
	r.mu.Unlock()
	log.Info("agent process started", "pid", cmd.Process.Pid, "binary", argv[0])
	return rt.Handle{SessionID: spec.SessionID, ID: strconv.Itoa(cmd.Process.Pid)}, nil
}

// environ is the agent's whole environment: its spec, its endpoints as a
// host process sees them and the CLAWGUARD_* variables, none of the
// runner's own.
func environ(spec rt.SessionSpec) []string {
	return rt.AgentEnv(spec, spec.SessionDir, true)
}

func (r *Runtime) get(sessionID string) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[sessionID]
}

func (r *Runtime) Stop(ctx context.Context, sessionID string) error {
	unlock := r.locks.Lock(sessionID)
	defer unlock()
	return r.stop(ctx, sessionID)
}

// stop sends SIGTERM to the agent's process group, SIGKILL after the grace
// period (or once ctx ends, whichever is first), and waits until the
// process is reaped.
func (r *Runtime) stop(ctx context.Context, sessionID string) error {
	p := r.get(sessionID)
	if p == nil {
		return nil
	}
	pgid := p.cmd.Process.Pid // Setpgid: the group id is the agent's pid
	if !p.exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		// A stopped agent (SIGSTOP) handles its SIGTERM only once continued.
		_ = syscall.Kill(-pgid, syscall.SIGCONT)
		grace := time.NewTimer(r.cfg.StopTimeout)
		defer grace.Stop()
		select {
		case <-p.done:
		case <-grace.C:
			r.log.Warn("agent ignored SIGTERM; killing", "session", sessionID, "grace", r.cfg.StopTimeout)
		case <-ctx.Done():
		}
	}
	// Kill whatever is left of the group, even if the leader already exited.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop session %s: %w", sessionID, err)
	}
	// A SIGKILLed process is reaped at once; ctx may be over already (its
	// deadline was when to kill).
	reaped := time.NewTimer(reapWait)
	defer reaped.Stop()
	select {
	case <-p.done:
	case <-reaped.C:
		return fmt.Errorf("stop session %s: not reaped %s after SIGKILL", sessionID, reapWait)
	}
	r.mu.Lock()
	if r.procs[sessionID] == p {
		delete(r.procs, sessionID)
	}
	r.mu.Unlock()
	r.log.Info("agent process stopped", "session", sessionID)
	return nil
}

// reapWait bounds the wait for a SIGKILLed agent to be reaped.
const reapWait = 5 * time.Second

func (r *Runtime) Restart(ctx context.Context, spec rt.SessionSpec) (rt.Handle, error) {
	if err := spec.Validate(); err != nil {
		return rt.Handle{}, err
	}
	unlock := r.locks.Lock(spec.SessionID)
	defer unlock()
	if err := r.stop(ctx, spec.SessionID); err != nil {
		return rt.Handle{}, err
	}
	return r.start(spec)
}

func (r *Runtime) Running(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, p := range r.procs {
		if !p.exited() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// RemoveOrphans has nothing to do: agents die with the runner that started
// them (parent-death signal).
func (r *Runtime) RemoveOrphans(context.Context) (int, error) { return 0, nil }

func (r *Runtime) StopIdle(ctx context.Context, idleFor time.Duration, lastActive func(string) time.Time) (int, error) {
	r.mu.Lock()
	var idle []string
	for id, p := range r.procs {
		if time.Since(rt.IdleSince(lastActive(id), p.started)) >= idleFor {
			idle = append(idle, id)
		}
	}
	r.mu.Unlock()
	var errs []error
	n := 0
	for _, id := range idle {
		if err := r.Stop(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// BuildGroupImage builds nothing: a process agent is its binary (approved
// packages are not installed, and the build output says so). It returns
// the base (the binary path) so callers treat both runtimes alike.
func (r *Runtime) BuildGroupImage(_ context.Context, spec rt.GroupImageSpec) (string, error) {
	if spec.BaseImage == "" {
		return "", fmt.Errorf("group %s: no agent binary", spec.GroupID)
	}
	if len(spec.AptPackages)+len(spec.NpmPackages) > 0 && spec.Output != nil {
		fmt.Fprintf(spec.Output, "%s the process runtime runs the agent binary as it is\n", rt.NotInstalled)
	}
	return spec.BaseImage, nil
}

// lineLogger turns an agent's output into log records, one per line, with
// overly long lines cut so a noisy agent cannot grow the runner's memory.
type lineLogger struct {
	log    *slog.Logger
	stream string
	buf    []byte
}

const maxLine = 4096

func (l *lineLogger) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.buf = append(l.buf, b...)
			if len(l.buf) > maxLine {
				l.flush()
			}
			break
		}
		l.buf = append(l.buf, b[:i]...)
		l.flush()
		b = b[i+1:]
	}
	return n, nil
}

func (l *lineLogger) flush() {
	line := l.buf
	if len(line) > maxLine {
		line = line[:maxLine]
	}
	l.log.Info("agent output", "stream", l.stream, "line", string(line))
	l.buf = l.buf[:0]
}
