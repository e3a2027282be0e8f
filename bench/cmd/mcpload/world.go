package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// world is what the paths call: groups with the MCP server and read_file
// allowed, a runner hosting a session of each, and per session a direct
// client of the server, a gateway client and an MCP host on clawguard-mcp.
type world struct {
	c        config
	dir      string
	reg      guardv1.RegistryClient
	groups   []string
	sessions []string
	gws      []agentv1.AgentGatewayClient
	directs  []*mcp.ClientSession
	hosts    []*mcp.ClientSession
	guard    guardv1.GuardClient
	closers  []func()
	// pids of the runner and of each clawguard-mcp, for their CPU.
	runnerPID int
	facePIDs  []int
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// fileBody is what every read_file returns (a few hundred bytes, a small file).
var fileBody = strings.Repeat("the quick brown fox jumps over the lazy dog\n", 8)

func newWorld(ctx context.Context, c config) (_ *world, err error) {
	w := &world{c: c}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	tok, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(strings.TrimSpace(string(tok)))))
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, func() { conn.Close() })
	w.reg = guardv1.NewRegistryClient(conn)
	if w.dir, err = os.MkdirTemp("", "mcpl"); err != nil {
		return nil, err
	}
	w.closers = append(w.closers, func() { os.RemoveAll(w.dir) })
	os.Chmod(w.dir, 0o755)
	if err := w.makeGroups(ctx); err != nil {
		return nil, err
	}
	secret, err := w.startRunner(ctx)
	if err != nil {
		return nil, err
	}
	socks, err := waitSockets(ctx, w.reg, w.groups, w.runnerID(), filepath.Join(w.dir, "data", "sockets"), 60*time.Second)
	if err != nil {
		return nil, err
	}
	w.sessions, _ = sessionIDs(socks)
	return w, w.connect(ctx, socks, secret)
}

func (w *world) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
}

func (w *world) runnerID() string { return "mcpload-" + filepath.Base(w.dir) }

// makeGroups makes the groups, each with the server fs and read_file
// allowed, and the file it reads in the server's working directory.
func (w *world) makeGroups(ctx context.Context) error {
	stamp := time.Now().UnixNano() % 1e9
	for i := range w.c.sessions {
		g, err := w.reg.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: fmt.Sprintf("mcpload-%d-%d", stamp, i)})
		if err != nil {
			return fmt.Errorf("create group: %w", err)
		}
		id := g.GetGroup().GetId()
		w.groups = append(w.groups, id)
		if _, err := w.reg.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: id, Server: &guardv1.McpServer{Name: "fs", Command: w.c.mcpBin}}); err != nil {
			return fmt.Errorf("add MCP server: %w", err)
		}
		if _, err := w.reg.SetMcpTool(ctx, &guardv1.SetMcpToolRequest{Group: id, Server: "fs", Tool: "read_file", Effect: guardv1.Effect_EFFECT_ALLOW}); err != nil {
			return fmt.Errorf("allow read_file: %w", err)
		}
		// The runner's data dir is the server's working directory there.
		fsDir := filepath.Join(w.dir, "data", "mcp", id, "fs")
		if err := os.MkdirAll(fsDir, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(fsDir, "f.txt"), []byte(fileBody), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startRunner starts a runner (process runtime) hosting one session of each
// group, and returns its token.
func (w *world) startRunner(ctx context.Context) (string, error) {
	rt, err := w.reg.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: w.runnerID(), RunnerId: w.runnerID()})
	if err != nil {
		return "", fmt.Errorf("runner token: %w", err)
	}
	rtFile := filepath.Join(w.dir, "runner.token")
	if err := os.WriteFile(rtFile, []byte(rt.GetSecret()), 0o600); err != nil {
		return "", err
	}
	agent := w.c.agentBin
	if agent == "" {
		agent = filepath.Join(w.dir, "waiting-agent")
		if err := os.WriteFile(agent, []byte("#!/bin/sh\nexec sleep 1000000\n"), 0o755); err != nil {
			return "", err
		}
	}
	args := []string{"--server", w.c.addr, "--token-file", rtFile, "--id", w.runnerID(), "--runtime", "process",
		"--data-dir", filepath.Join(w.dir, "data"), "--agent-binary", agent, "--log-level", "warn"}
	for _, g := range w.groups {
		args = append(args, "--group", g)
	}
	runner := exec.Command(w.c.runnerBin, args...)
	runner.Stderr, runner.Stdout = os.Stderr, os.Stderr
	if err := runner.Start(); err != nil {
		return "", err
	}
	w.runnerPID = runner.Process.Pid
	w.closers = append(w.closers, func() { runner.Process.Signal(os.Interrupt); runner.Wait() })
	return rt.GetSecret(), nil
}

// connect makes each path's clients: the gateways, the direct stdio
// clients, the MCP hosts on clawguard-mcp and the runner's guard client.
func (w *world) connect(ctx context.Context, socks []string, runnerSecret string) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpload", Version: "v1"}, nil)
	for i, s := range socks {
		gc, err := grpc.NewClient("unix://"+s, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		w.closers = append(w.closers, func() { gc.Close() })
		w.gws = append(w.gws, agentv1.NewAgentGatewayClient(gc))

		cmd := exec.Command(w.c.mcpBin)
		cmd.Dir = filepath.Join(w.dir, "data", "mcp", w.groups[i], "fs")
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return fmt.Errorf("direct MCP client: %w", err)
		}
		w.closers = append(w.closers, func() { cs.Close() })
		w.directs = append(w.directs, cs)

		if strings.Contains(w.c.paths, "host") {
			face := exec.Command(w.c.faceBin, "--socket", s, "--inbox-queue", filepath.Join(w.dir, fmt.Sprintf("queue-%d.jsonl", i)))
			hs, err := client.Connect(ctx, &mcp.CommandTransport{Command: face}, nil)
			if err != nil {
				return fmt.Errorf("MCP host on clawguard-mcp: %w", err)
			}
			w.closers = append(w.closers, func() { hs.Close() })
			w.hosts = append(w.hosts, hs)
			w.facePIDs = append(w.facePIDs, face.Process.Pid)
		}
	}
	rconn, err := grpc.NewClient(w.c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(runnerSecret)))
	if err != nil {
		return err
	}
	w.closers = append(w.closers, func() { rconn.Close() })
	w.guard = guardv1.NewGuardClient(rconn)
	return nil
}

// sessionIDs are the sessions of the gateway sockets (<session>.sock).
func sessionIDs(socks []string) ([]string, error) {
	out := make([]string, len(socks))
	for i, s := range socks {
		out[i] = strings.TrimSuffix(filepath.Base(s), ".sock")
	}
	return out, nil
}

// waitSockets waits for the runner's session of each group and its
// gateway socket (the runner may be handed other sessions too: those of
// runners gone before it).
func waitSockets(ctx context.Context, reg guardv1.RegistryClient, groups []string, runnerID, dir string, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		for {
			resp, err := reg.ListSessions(ctx, &guardv1.ListSessionsRequest{Group: g, RunnerId: runnerID})
			if err == nil && len(resp.GetSessions()) > 0 {
				sock := filepath.Join(dir, resp.GetSessions()[0].GetId()+".sock")
				if _, err := os.Stat(sock); err == nil {
					out = append(out, sock)
					break
				}
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("no session socket of group %s on runner %s after %s (%v)", g, runnerID, within, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return out, nil
}
