package mcphost_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawguard/clawguard/runner/internal/mcphost"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
	"github.com/clawguard/clawguard/runner/internal/runtime/process"
)

var (
	binOnce sync.Once
	bin     string
	binErr  error
)

// fsmcp builds the test MCP server once.
func fsmcp(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cg-fsmcp")
		if err != nil {
			binErr = err
			return
		}
		bin = filepath.Join(dir, "fsmcp")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/fsmcp")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = err
			t.Logf("%s", out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return bin
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func hostWith(t *testing.T, launcher rt.MCPLauncher, spec rt.MCPServerSpec) (*mcphost.Host, chan string) {
	t.Helper()
	changed := make(chan string, 16)
	h := mcphost.New(mcphost.Config{Launcher: launcher, DataDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnToolsChanged: func(g string) { changed <- g }})
	t.Cleanup(h.Close)
	h.Sync("g1", []rt.MCPServerSpec{spec})
	return h, changed
}

// A hosted server is started on first use, answers tools/call with its
// credential, and a tool it adds (tools/list_changed) is listed after.
func exercise(t *testing.T, h *mcphost.Host, changed chan string) {
	t.Helper()
	ctx := context.Background()
	tools, err := h.Tools(ctx, "g1", "fs")
	if err != nil || len(tools) != 4 {
		t.Fatalf("tools: %v, %v", tools, err)
	}
	res, err := h.Call(ctx, "g1", "fs", "credential", nil)
	if err != nil || text(res) != "FS_TOKEN=t0k" {
		t.Fatalf("credential: %v, %v", res, err)
	}
	if _, err := h.Call(ctx, "g1", "fs", "add_tool", map[string]any{"name": "late"}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-changed:
		if g != "g1" {
			t.Fatalf("tools changed for %q", g)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no tools changed after the server's tools/list_changed")
	}
	tools, _ = h.Tools(ctx, "g1", "fs")
	if len(tools) != 5 {
		t.Fatalf("after list_changed: %d tools", len(tools))
	}
	if _, err := h.Call(ctx, "g1", "nope", "x", nil); err == nil {
		t.Fatal("a call of a server the group does not have reached something")
	}
}

func TestProcessHostedServer(t *testing.T) {
	r := process.New(process.Config{InstallID: "t"})
	h, changed := hostWith(t, r, rt.MCPServerSpec{Name: "fs", Command: fsmcp(t), Env: map[string]string{"FS_TOKEN": "t0k"}})
	exercise(t, h, changed)
}

func TestDockerHostedServer(t *testing.T) {
	ctx := context.Background()
	r, err := docker.New(ctx, docker.Config{InstallID: "mcphost-test"})
	if err != nil {
		t.Fatalf("docker: %v", err)
	}
	t.Cleanup(func() { r.RemoveOrphans(context.Background()); r.Close() })
	if err := r.BuildBaseImage(ctx, fsmcp(t), "clawguard-fsmcp:mcphost-test"); err != nil {
		t.Fatal(err)
	}
	h, changed := hostWith(t, r, rt.MCPServerSpec{Name: "fs", Command: "/agent", Image: "clawguard-fsmcp:mcphost-test", Env: map[string]string{"FS_TOKEN": "t0k"}})
	exercise(t, h, changed)
}
