// Package mcphost hosts the guarded MCP servers of the groups whose sessions
// run on this runner: each (group, server) is started on first use — its
// own container under the docker runtime, its own process under the process
// runtime (runtime.MCPLauncher) — and talked to over its stdio with the
// official MCP Go SDK's client. Agents never reach it: their tool calls come
// through the gateway, are decided by the guard (mcp.call) and only then
// forwarded here. A server whose config changed is restarted; one removed
// is stopped; one idle for IdleAfter is stopped and started again on the
// next call.
package mcphost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Config configures a host.
type Config struct {
	Launcher rt.MCPLauncher
	// DataDir holds each server's data directory (<DataDir>/<group>/<server>).
	DataDir string
	// OnToolsChanged is told when a group's tool set may have changed: a
	// server added, removed or restarted, or a tools/list_changed from one.
	OnToolsChanged func(group string)
	// IdleAfter stops a server no call used for that long (default 10m).
	IdleAfter time.Duration
	// CallTimeout bounds one tools/call (default 2m).
	CallTimeout time.Duration
	Log         *slog.Logger
}

// ErrNoServer is a call of a server the group does not have on this runner.
var ErrNoServer = errors.New("no such MCP server")

// Host runs the guarded MCP servers. Safe for concurrent use.
type Host struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	configs   map[string][]rt.MCPServerSpec // by group: the last config read
	instances map[key]*instance
	closed    bool
}

type key struct{ group, server string }

// instance is one running (or starting) server.
type instance struct {
	spec   rt.MCPServerSpec
	digest string

	ready   chan struct{} // closed once started (or failed)
	err     error
	session *mcp.ClientSession

	mu       sync.Mutex
	tools    []*mcp.Tool
	lastUsed time.Time
}

// New returns a host.
func New(cfg Config) *Host {
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = 10 * time.Minute
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Host{cfg: cfg, log: cfg.Log.With("component", "mcphost"), configs: map[string][]rt.MCPServerSpec{}, instances: map[key]*instance{}}
}

// Sync sets a group's servers as its config names them: a server gone or
// changed is stopped (a changed one starts again on next use, on the new
// config). Only a change tells OnToolsChanged.
func (h *Host) Sync(group string, servers []rt.MCPServerSpec) {
	servers = slices.Clone(servers)
	sort.Slice(servers, func(i, j int) bool { return servers[i].Name < servers[j].Name })
	for i := range servers {
		servers[i].GroupID = group
		servers[i].DataDir = filepath.Join(h.cfg.DataDir, group, servers[i].Name)
	}
	h.mu.Lock()
	old, known := h.configs[group]
	h.configs[group] = servers
	var stop []*instance
	for k, inst := range h.instances {
		if k.group != group {
			continue
		}
		i := slices.IndexFunc(servers, func(s rt.MCPServerSpec) bool { return s.Name == k.server })
		if i < 0 || digest(servers[i]) != inst.digest {
			stop = append(stop, inst)
			delete(h.instances, k)
		}
	}
	h.mu.Unlock()
	for _, inst := range stop {
		h.stop(inst, "its config changed or it was removed")
	}
	if changed := !known || !sameServers(old, servers); (changed && known) || len(stop) > 0 {
		h.toolsChanged(group)
	}
}

// Configured reports whether the group's config was read (Sync) at all.
func (h *Host) Configured(group string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.configs[group]
	return ok
}

// Servers lists the group's server names, sorted.
func (h *Host) Servers(group string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, s := range h.configs[group] {
		out = append(out, s.Name)
	}
	return out
}

// Tools lists a server's tools, starting it if it is not running.
func (h *Host) Tools(ctx context.Context, group, server string) ([]*mcp.Tool, error) {
	inst, err := h.get(ctx, group, server)
	if err != nil {
		return nil, err
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.lastUsed = time.Now()
	return slices.Clone(inst.tools), nil
}

// Call runs one tools/call on the server, starting it if it is not
// running. A tool error is a result (IsError); an error means the call did
// not reach the server or got no answer.
func (h *Host) Call(ctx context.Context, group, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	inst, err := h.get(ctx, group, server)
	if err != nil {
		return nil, err
	}
	inst.mu.Lock()
	inst.lastUsed = time.Now()
	inst.mu.Unlock()
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	res, err := inst.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: tools/call %s: %w", server, tool, err)
	}
	return res, nil
}

// get returns the running instance, starting it (once, whoever asks first).
func (h *Host) get(ctx context.Context, group, server string) (*instance, error) {
	k := key{group, server}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("the runner is stopping")
	}
	inst := h.instances[k]
	if inst == nil {
		i := slices.IndexFunc(h.configs[group], func(s rt.MCPServerSpec) bool { return s.Name == server })
		if i < 0 {
			h.mu.Unlock()
			return nil, fmt.Errorf("%w %q in group %s", ErrNoServer, server, group)
		}
		spec := h.configs[group][i]
		inst = &instance{spec: spec, digest: digest(spec), ready: make(chan struct{})}
		h.instances[k] = inst
		go h.start(inst)
	}
	h.mu.Unlock()
	select {
	case <-inst.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if inst.err != nil {
		return nil, inst.err
	}
	return inst, nil
}

// start launches the server, connects the client and lists its tools. A
// failed start is forgotten, so the next use tries again.
func (h *Host) start(inst *instance) {
	defer close(inst.ready)
	spec := inst.spec
	log := h.log.With("group", spec.GroupID, "server", spec.Name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec.Stderr = &lineLog{log: log}
	t, err := h.cfg.Launcher.LaunchMCP(ctx, spec)
	if err == nil {
		client := mcp.NewClient(&mcp.Implementation{Name: "clawguard-runner", Version: "v1"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{},
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				log.Debug("tools/list_changed from the server")
				go h.relist(inst)
			},
		})
		inst.session, err = client.Connect(ctx, t, nil)
	}
	if err == nil {
		var tools []*mcp.Tool
		if tools, err = listTools(ctx, inst.session); err == nil {
			inst.tools, inst.lastUsed = tools, time.Now()
		} else {
			_ = inst.session.Close()
		}
	}
	if err != nil {
		inst.err = fmt.Errorf("MCP server %s did not start: %w", spec.Name, err)
		log.Warn("guarded MCP server did not start", "err", err)
		h.forget(inst)
		return
	}
	log.Info("guarded MCP server started", "tools", len(inst.tools))
	go func() {
		// A server that exits is forgotten: the next use starts it again.
		err := inst.session.Wait()
		if h.forget(inst) {
			log.Warn("guarded MCP server exited", "err", err)
			h.toolsChanged(spec.GroupID)
		}
	}()
}

func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// relist reads the tools again after a tools/list_changed.
func (h *Host) relist(inst *instance) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := listTools(ctx, inst.session)
	if err != nil {
		h.log.Warn("tools/list after list_changed", "server", inst.spec.Name, "err", err)
		return
	}
	inst.mu.Lock()
	inst.tools = tools
	inst.mu.Unlock()
	h.toolsChanged(inst.spec.GroupID)
}

// forget drops inst from the running set; false when it was not there.
func (h *Host) forget(inst *instance) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := key{inst.spec.GroupID, inst.spec.Name}
	if h.instances[k] != inst {
		return false
	}
	delete(h.instances, k)
	return true
}

func (h *Host) stop(inst *instance, why string) {
	<-inst.ready
	if inst.session != nil {
		_ = inst.session.Close()
		h.log.Info("guarded MCP server stopped", "group", inst.spec.GroupID, "server", inst.spec.Name, "why", why)
	}
}

func (h *Host) toolsChanged(group string) {
	if h.cfg.OnToolsChanged != nil {
		h.cfg.OnToolsChanged(group)
	}
}

// IdleLoop stops servers idle for IdleAfter, checking every interval.
func (h *Host) IdleLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		var idle []*instance
		for k, inst := range h.instances {
			select {
			case <-inst.ready:
			default:
				continue // starting
			}
			inst.mu.Lock()
			if time.Since(inst.lastUsed) >= h.cfg.IdleAfter {
				idle = append(idle, inst)
				delete(h.instances, k)
			}
			inst.mu.Unlock()
		}
		h.mu.Unlock()
		for _, inst := range idle {
			h.stop(inst, "idle")
		}
	}
}

// Close stops every server.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	all := make([]*instance, 0, len(h.instances))
	for k, inst := range h.instances {
		all = append(all, inst)
		delete(h.instances, k)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, inst := range all {
		wg.Add(1)
		go func() { defer wg.Done(); h.stop(inst, "the runner is stopping") }()
	}
	wg.Wait()
}

// digest identifies a server's config: a change restarts it.
func digest(s rt.MCPServerSpec) string {
	b, _ := json.Marshal(struct {
		Command string
		Args    []string
		Env     map[string]string
		Image   string
	}{s.Command, s.Args, s.Env, s.Image})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sameServers(a, b []rt.MCPServerSpec) bool {
	return slices.EqualFunc(a, b, func(x, y rt.MCPServerSpec) bool { return x.Name == y.Name && digest(x) == digest(y) })
}

// lineLog logs a server's standard error line by line (bounded).
type lineLog struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range p {
		if c == '\n' || len(l.buf) >= 4096 {
			l.log.Info("MCP server stderr", "line", string(l.buf))
			l.buf = l.buf[:0]
			if c == '\n' {
				continue
			}
		}
		l.buf = append(l.buf, c)
	}
	return len(p), nil
}
