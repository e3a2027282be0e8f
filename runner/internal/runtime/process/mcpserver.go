package process

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// LaunchMCP runs a guarded MCP server as a child process of the runner, in
// its own data directory and process group, with only its own environment
// (plus PATH, to find its command, and HOME, its data directory): nothing
// of the runner's or any agent's. Its stdin and stdout are pipes the runner
// holds; no agent has a path to them. It dies with the runner
// (parent-death signal).
func (r *Runtime) LaunchMCP(_ context.Context, spec rt.MCPServerSpec) (mcp.Transport, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("MCP server %s data dir: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Dir = spec.DataDir
	cmd.Env = mcpEnviron(spec)
	cmd.Stderr = spec.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = io.Discard
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	r.log.Info("starting guarded MCP server", "group", spec.GroupID, "server", spec.Name, "command", spec.Command)
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

func mcpEnviron(spec rt.MCPServerSpec) []string {
	env := make([]string, 0, len(spec.Env)+2)
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	if _, set := spec.Env["PATH"]; !set {
		env = append(env, "PATH="+os.Getenv("PATH"))
	}
	if _, set := spec.Env["HOME"]; !set {
		env = append(env, "HOME="+spec.DataDir)
	}
	return env
}
