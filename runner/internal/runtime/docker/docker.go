// Package docker runs each agent session in its own locked-down container
// through the Docker Engine API.
//
// Every container: cap-drop ALL, no-new-privileges, a pids limit, read-only
// root file system (a small tmpfs on /tmp), network mode "none" (the agent
// gateway socket is its only way out), a non-root user, restart policy "no",
// CPU and memory limits only when configured, the session directory bound at
// /workspace and the gateway socket at /run/clawguard/gateway.sock. Containers
// are named clawguard-<install>-<session> and labelled with install, session
// and group. Stopped containers are removed: the session's state lives in its
// directory, so a push to a stopped session simply starts a fresh container.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Config configures the Docker runtime.
type Config struct {
	InstallID   string        // this runner's id; labels every container
	User        string        // uid:gid agents run as; default "65534:65534" (nobody)
	StopTimeout time.Duration // grace between SIGTERM and SIGKILL; default 10s
	// BuildNetwork is the network of group image builds that install
	// packages (they fetch from the package sources); default "default",
	// Docker's bridge. "none" makes such builds fail. Builds that install
	// nothing always run with no network.
	BuildNetwork string
	// MCPNetwork is the network of guarded MCP servers' containers; default
	// "none". A server that calls an API needs one ("bridge"); an agent's
	// container never has one, so it reaches no MCP server either way.
	MCPNetwork string
	// HomeSize caps the agent's HOME, a tmpfs (default 256m).
	HomeSize string
	// Tools are copied into every group image (AgentTools): the zero value
	// copies none (tests of other things).
	Tools  AgentTools
	Logger *slog.Logger
}

// DefaultUser is nobody:nogroup.
const DefaultUser = "65534:65534"

// Runtime is the Docker implementation of runtime.Runtime.
type Runtime struct {
	cli   *client.Client
	cfg   Config
	log   *slog.Logger
	locks rt.SessionLocks

	pmMu    sync.Mutex
	pmCache map[string]packageManagers // by base image id

	tools *toolLayer // nil: none configured
}

var _ rt.Runtime = (*Runtime)(nil)

// New connects to the daemon named by the DOCKER_* environment, negotiating
// the API version, and fails if it does not answer.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if !rt.ValidID(cfg.InstallID) {
		return nil, fmt.Errorf("docker runtime: invalid install id %q", cfg.InstallID)
	}
	if cfg.User == "" {
		cfg.User = DefaultUser
	}
	if _, _, err := parseUser(cfg.User); err != nil {
		return nil, fmt.Errorf("docker runtime: %w", err) // never run agents as root
	}
	if cfg.BuildNetwork == "" {
		cfg.BuildNetwork = "default"
	}
	if cfg.MCPNetwork == "" {
		cfg.MCPNetwork = "none"
	}
	if cfg.HomeSize == "" {
		cfg.HomeSize = "256m"
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tools, err := loadTools(cfg.Tools)
	if err != nil {
		return nil, fmt.Errorf("docker runtime: %w", err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker runtime: client: %w", err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker runtime: daemon not reachable: %w", err)
	}
	return &Runtime{cli: cli, cfg: cfg, tools: tools, log: cfg.Logger.With("runtime", "docker", "install", cfg.InstallID)}, nil
}

// Close releases the client's connections. Containers keep running; the next
// start's RemoveOrphans cleans them up.
func (r *Runtime) Close() error { return r.cli.Close() }

// Client exposes the Docker client for tests and diagnostics.
func (r *Runtime) Client() *client.Client { return r.cli }

func (r *Runtime) Name() string { return "docker" }

// ContainerName is the name of a session's container.
func (r *Runtime) ContainerName(sessionID string) string {
	return "clawguard-" + r.cfg.InstallID + "-" + sessionID
}

func (r *Runtime) Start(ctx context.Context, spec rt.SessionSpec) (rt.Handle, error) {
	if err := spec.Validate(); err != nil {
		return rt.Handle{}, err
	}
	unlock := r.locks.Lock(spec.SessionID)
	defer unlock()
	return r.start(ctx, spec)
}

func (r *Runtime) start(ctx context.Context, spec rt.SessionSpec) (rt.Handle, error) {
	name := r.ContainerName(spec.SessionID)
	existing, err := r.cli.ContainerInspect(ctx, name)
	switch {
	case err == nil && existing.State != nil && existing.State.Running:
		return rt.Handle{SessionID: spec.SessionID, ID: existing.ID, Reused: true}, nil
	case err == nil:
		// Exited or never started: state lives in the session dir, so start clean.
		if err := r.remove(ctx, existing.ID); err != nil {
			return rt.Handle{}, err
		}
	case !errdefs.IsNotFound(err):
		return rt.Handle{}, fmt.Errorf("inspect %s: %w", name, err)
	}

	cfg, host, err := r.containerConfig(spec)
	if err != nil {
		return rt.Handle{}, err
	}
	if err := rt.CheckEndpoints(spec.Endpoints); err != nil {
		return rt.Handle{}, fmt.Errorf("start session %s: %w", spec.SessionID, err)
	}
	if err := r.prepareSessionDir(spec.SessionDir); err != nil {
		return rt.Handle{}, fmt.Errorf("start session %s: %w", spec.SessionID, err)
	}
	created, err := r.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil {
		return rt.Handle{}, fmt.Errorf("create container %s: %w", name, err)
	}
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		_ = r.remove(context.WithoutCancel(ctx), created.ID)
		return rt.Handle{}, fmt.Errorf("start container %s: %w", name, err)
	}
	r.log.Info("session container started", "session", spec.SessionID, "group", spec.AgentGroupID,
		"container", created.ID[:12], "image", spec.Image)
	return rt.Handle{SessionID: spec.SessionID, ID: created.ID}, nil
}

// containerConfig turns a validated spec into the create request.
func (r *Runtime) containerConfig(spec rt.SessionSpec) (*container.Config, *container.HostConfig, error) {
	nanoCPUs, err := rt.ParseCPUs(spec.CPUs)
	if err != nil {
		return nil, nil, err
	}
	memory, err := rt.ParseMemory(spec.Memory)
	if err != nil {
		return nil, nil, err
	}
	env := append(rt.AgentEnv(spec, rt.ContainerWorkspace, false), r.agentEnv()...)
	pids := spec.EffectivePidsLimit()
	home, err := r.homeTmpfs()
	if err != nil {
		return nil, nil, err
	}
	entrypoint, cmd := r.command(spec)
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: entrypoint,
		Cmd:        cmd,
		Env:        env,
		User:       r.cfg.User,
		WorkingDir: rt.ContainerWorkspace,
		Labels: map[string]string{
			rt.LabelInstall: r.cfg.InstallID,
			rt.LabelSession: spec.SessionID,
			rt.LabelGroup:   spec.AgentGroupID,
		},
		NetworkDisabled: true,
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs:          map[string]string{"/tmp": "rw,noexec,nosuid,nodev,size=16m", AgentHome: home},
		Mounts:         mounts(spec),
		Resources: container.Resources{
			PidsLimit: &pids,
			NanoCPUs:  nanoCPUs, // 0 → no limit, as if --cpus were not passed
			Memory:    memory,   // 0 → no limit, as if --memory were not passed
		},
	}
	return cfg, host, nil
}

// mounts are the session's workspace and each of its endpoints' sockets.
func mounts(spec rt.SessionSpec) []mount.Mount {
	out := []mount.Mount{{Type: mount.TypeBind, Source: spec.SessionDir, Target: rt.ContainerWorkspace}}
	for _, e := range spec.Endpoints {
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: e.HostSocket, Target: e.ContainerSocket})
	}
	return out
}

// prepareSessionDir makes sure the agent's non-root user can write its
// workspace. Without root the directory is left as it is.
func (r *Runtime) prepareSessionDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session dir: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid, err := parseUser(r.cfg.User)
	if err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("session dir: %w", err)
	}
	return nil
}

func parseUser(user string) (int, int, error) {
	uidS, gidS, found := strings.Cut(user, ":")
	if !found {
		gidS = uidS
	}
	uid, err1 := strconv.Atoi(uidS)
	gid, err2 := strconv.Atoi(gidS)
	if err1 != nil || err2 != nil || uid == 0 {
		return 0, 0, fmt.Errorf("agent user %q: want a numeric non-root uid[:gid]", user)
	}
	return uid, gid, nil
}

func (r *Runtime) Stop(ctx context.Context, sessionID string) error {
	if !rt.ValidID(sessionID) {
		return fmt.Errorf("%w: session id %q", rt.ErrInvalidSpec, sessionID)
	}
	unlock := r.locks.Lock(sessionID)
	defer unlock()
	return r.stop(ctx, sessionID)
}

func (r *Runtime) stop(ctx context.Context, sessionID string) error {
	name := r.ContainerName(sessionID)
	grace := r.cfg.StopTimeout
	if d, ok := ctx.Deadline(); ok {
		// SIGKILL by ctx's deadline (a lease fence), leaving the daemon a
		// moment to answer.
		grace = min(grace, time.Until(d)-time.Second)
	}
	timeout := max(int(grace/time.Second), 0) // 0: SIGKILL right after SIGTERM
	err := r.cli.ContainerStop(ctx, name, container.StopOptions{Timeout: &timeout})
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop container %s: %w", name, err)
	}
	if err := r.remove(ctx, name); err != nil {
		return err
	}
	r.log.Info("session container stopped", "session", sessionID)
	return nil
}

// remove force-removes a container; a container already gone is fine.
func (r *Runtime) remove(ctx context.Context, idOrName string) error {
	err := r.cli.ContainerRemove(ctx, idOrName, container.RemoveOptions{Force: true})
	if err != nil && !errdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		return fmt.Errorf("remove container %s: %w", idOrName, err)
	}
	return nil
}

func isRemovalInProgress(err error) bool {
	return errdefs.IsConflict(err) && strings.Contains(strings.ToLower(err.Error()), "already in progress")
}

func (r *Runtime) Restart(ctx context.Context, spec rt.SessionSpec) (rt.Handle, error) {
	if err := spec.Validate(); err != nil {
		return rt.Handle{}, err
	}
	unlock := r.locks.Lock(spec.SessionID)
	defer unlock()
	if err := r.stop(ctx, spec.SessionID); err != nil {
		return rt.Handle{}, err
	}
	return r.start(ctx, spec)
}

// list returns this install's containers; all includes stopped ones.
func (r *Runtime) list(ctx context.Context, all bool) ([]container.Summary, error) {
	f := filters.NewArgs(filters.Arg("label", rt.LabelInstall+"="+r.cfg.InstallID))
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: all, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return cs, nil
}

func (r *Runtime) Running(ctx context.Context) ([]string, error) {
	cs, err := r.list(ctx, false)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(cs))
	for _, c := range cs {
		// Guarded MCP servers' containers carry no session.
		if c.State == container.StateRunning && c.Labels[rt.LabelSession] != "" {
			ids = append(ids, c.Labels[rt.LabelSession])
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func (r *Runtime) RemoveOrphans(ctx context.Context) (int, error) {
	cs, err := r.list(ctx, true)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, c := range cs {
		if err := r.remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if n > 0 {
		r.log.Info("removed orphan containers", "count", n)
	}
	return n, errors.Join(errs...)
}

func (r *Runtime) StopIdle(ctx context.Context, idleFor time.Duration, lastActive func(string) time.Time) (int, error) {
	cs, err := r.list(ctx, false)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, c := range cs {
		session := c.Labels[rt.LabelSession]
		if !rt.ValidID(session) {
			continue
		}
		if time.Since(rt.IdleSince(lastActive(session), time.Unix(c.Created, 0))) < idleFor {
			continue
		}
		if err := r.Stop(ctx, session); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
