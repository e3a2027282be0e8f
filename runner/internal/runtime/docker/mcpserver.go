package docker

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// MCPContainerName is the container of a group's guarded MCP server.
func (r *Runtime) MCPContainerName(group, server string) string {
	return "clawguard-" + r.cfg.InstallID + "-mcp-" + group + "-" + server
}

// LaunchMCP runs a guarded MCP server in a container of its own, never in
// an agent's: locked down like an agent's (cap-drop ALL, no-new-privileges,
// read-only root, non-root user, pids limit), its data directory at /data,
// its environment its own, on --mcp-network (default none). The runner
// reaches it through the Docker API's attach stream — its stdin and stdout
// — and nothing else does: no socket, no port, no mount it shares with an
// agent. It carries this install's label, so a restarted runner removes it
// as an orphan.
func (r *Runtime) LaunchMCP(_ context.Context, spec rt.MCPServerSpec) (mcp.Transport, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if !imageRefPattern.MatchString(spec.Image) {
		return nil, fmt.Errorf("%w: MCP server %s: image %q is not a plain image reference", rt.ErrInvalidSpec, spec.Name, spec.Image)
	}
	return &mcpContainer{r: r, spec: spec}, nil
}

type mcpContainer struct {
	r    *Runtime
	spec rt.MCPServerSpec
}

// Connect creates the container, attaches to its stdio and starts it.
func (m *mcpContainer) Connect(ctx context.Context) (mcp.Connection, error) {
	r, spec := m.r, m.spec
	name := r.MCPContainerName(spec.GroupID, spec.Name)
	if err := r.remove(ctx, name); err != nil {
		return nil, err
	}
	if err := r.prepareSessionDir(spec.DataDir); err != nil {
		return nil, fmt.Errorf("MCP server %s: %w", spec.Name, err)
	}
	env := make([]string, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	pids := rt.DefaultPidsLimit
	network := r.cfg.MCPNetwork
	cfg := &container.Config{
		Image: spec.Image, Entrypoint: []string{spec.Command}, Cmd: spec.Args, Env: env,
		User: r.cfg.User, WorkingDir: rt.ContainerMCPData,
		OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Labels: map[string]string{
			rt.LabelInstall: r.cfg.InstallID, rt.LabelGroup: spec.GroupID, rt.LabelMCPServer: spec.Name,
		},
		NetworkDisabled: network == "none",
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(network),
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs:          map[string]string{"/tmp": "rw,noexec,nosuid,nodev,size=16m"},
		Mounts:         []mount.Mount{{Type: mount.TypeBind, Source: spec.DataDir, Target: rt.ContainerMCPData}},
		Resources:      container.Resources{PidsLimit: &pids},
	}
	created, err := r.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil {
		return nil, fmt.Errorf("create MCP server container %s: %w", name, err)
	}
	// Attached before it starts: nothing it writes is lost.
	hj, err := r.cli.ContainerAttach(ctx, created.ID, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		_ = r.remove(context.WithoutCancel(ctx), created.ID)
		return nil, fmt.Errorf("attach MCP server container %s: %w", name, err)
	}
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		hj.Close()
		_ = r.remove(context.WithoutCancel(ctx), created.ID)
		return nil, fmt.Errorf("start MCP server container %s: %w", name, err)
	}
	r.log.Info("guarded MCP server container started", "group", spec.GroupID, "server", spec.Name,
		"container", created.ID[:12], "image", spec.Image, "network", network)
	stdout, w := io.Pipe()
	stderr := spec.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	go func() {
		_, err := stdcopy.StdCopy(w, stderr, hj.Reader)
		w.CloseWithError(err)
	}()
	in := &attachedStdin{r: r, hj: hj, id: created.ID}
	return (&mcp.IOTransport{Reader: stdout, Writer: in}).Connect(ctx)
}

// attachedStdin writes to the container's stdin; closing it ends the
// server the way the stdio transport asks (stdin closed, a grace, then
// the container removed).
type attachedStdin struct {
	r  *Runtime
	hj types.HijackedResponse
	id string
}

func (a *attachedStdin) Write(p []byte) (int, error) { return a.hj.Conn.Write(p) }

func (a *attachedStdin) Close() error {
	_ = a.hj.CloseWrite()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	waitC, errC := a.r.cli.ContainerWait(ctx, a.id, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case <-errC:
	case <-ctx.Done():
	}
	a.hj.Close()
	err := a.r.remove(context.Background(), a.id)
	if err != nil && !errdefs.IsNotFound(err) {
		return err
	}
	return nil
}
