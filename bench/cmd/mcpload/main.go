// Command mcpload measures what the guarded path adds to an allowed MCP
// tools/call: the same MCP server called directly over stdio (the official
// Go SDK's client on the server's stdin and stdout), against the agent's
// path — the session's gateway (Send mcp_call) → the runner's decision
// (mcp.call on Guard.DecideStream, logged) → the runner's client → the same
// server. Open loop at -rate calls/s over -sessions sessions (the gateway
// allows 20 sends/s per session), latency from each call's scheduled time.
//
// It needs a running server (-addr, its operator token in -token-file), a
// clawguard-runner binary (started here, process runtime), an agent binary
// for the runner's sessions (the demo agent) and a stdio MCP server with a
// read_file tool (the runner's test server, internal/mcphost/testdata/fsmcp).
//
//	mcpload -addr 127.0.0.1:7443 -token-file operator.token -runner-bin bin/clawguard-runner \
//	    -agent-bin bin/demo-agent -mcp-bin bin/fsmcp -rate 200 -duration 20s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

type config struct {
	addr, tokenFile, runnerBin, agentBin, mcpBin string
	rate                                         float64
	sessions                                     int
	duration, warmup                             time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:7443", "server gRPC address")
	flag.StringVar(&c.tokenFile, "token-file", "", "the server's operator token file")
	flag.StringVar(&c.runnerBin, "runner-bin", "bin/clawguard-runner", "clawguard-runner binary")
	flag.StringVar(&c.agentBin, "agent-bin", "", "agent binary for the runner's sessions (the demo agent)")
	flag.StringVar(&c.mcpBin, "mcp-bin", "", "stdio MCP server with a read_file {path} tool")
	flag.Float64Var(&c.rate, "rate", 200, "tool calls per second, over all sessions")
	flag.IntVar(&c.sessions, "sessions", 10, "agent sessions (groups) the calls are spread over")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "measured duration of each path")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "unmeasured warm-up at the same rate")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "mcpload:", err)
		os.Exit(1)
	}
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

func run(c config) error {
	ctx := context.Background()
	tok, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(strings.TrimSpace(string(tok)))))
	if err != nil {
		return err
	}
	defer conn.Close()
	reg := guardv1.NewRegistryClient(conn)
	dir, err := os.MkdirTemp("", "mcpl")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	// The data every read_file returns (a few hundred bytes, as a small file).
	payload := strings.Repeat("the quick brown fox jumps over the lazy dog\n", 8)

	// Groups, each with the MCP server and read_file allowed.
	stamp := time.Now().UnixNano() % 1e9
	var groups []string
	for i := range c.sessions {
		g, err := reg.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: fmt.Sprintf("mcpload-%d-%d", stamp, i)})
		if err != nil {
			return fmt.Errorf("create group: %w", err)
		}
		id := g.GetGroup().GetId()
		groups = append(groups, id)
		if _, err := reg.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: id, Server: &guardv1.McpServer{Name: "fs", Command: c.mcpBin}}); err != nil {
			return fmt.Errorf("add MCP server: %w", err)
		}
		if _, err := reg.SetMcpTool(ctx, &guardv1.SetMcpToolRequest{Group: id, Server: "fs", Tool: "read_file", Effect: guardv1.Effect_EFFECT_ALLOW}); err != nil {
			return fmt.Errorf("allow read_file: %w", err)
		}
		// The runner's data dir is the server's working directory there.
		fsDir := filepath.Join(dir, "data", "mcp", id, "fs")
		if err := os.MkdirAll(fsDir, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(fsDir, "f.txt"), []byte(payload), 0o644); err != nil {
			return err
		}
	}

	// The runner (process runtime) hosting one session of each group.
	runnerID := fmt.Sprintf("mcpload-%d", stamp)
	rt, err := reg.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: runnerID, RunnerId: runnerID})
	if err != nil {
		return fmt.Errorf("runner token: %w", err)
	}
	rtFile := filepath.Join(dir, "runner.token")
	if err := os.WriteFile(rtFile, []byte(rt.GetSecret()), 0o600); err != nil {
		return err
	}
	args := []string{"--server", c.addr, "--token-file", rtFile, "--id", runnerID, "--runtime", "process",
		"--data-dir", filepath.Join(dir, "data"), "--agent-binary", c.agentBin, "--log-level", "warn"}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	runner := exec.Command(c.runnerBin, args...)
	runner.Stderr, runner.Stdout = os.Stderr, os.Stderr
	if err := runner.Start(); err != nil {
		return err
	}
	defer func() { runner.Process.Signal(os.Interrupt); runner.Wait() }()

	socks, err := waitSockets(filepath.Join(dir, "data", "sockets"), c.sessions, 60*time.Second)
	if err != nil {
		return err
	}
	gws := make([]agentv1.AgentGatewayClient, len(socks))
	for i, s := range socks {
		gc, err := grpc.NewClient("unix://"+s, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer gc.Close()
		gws[i] = agentv1.NewAgentGatewayClient(gc)
	}
	args0, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "read_file", "arguments": map[string]any{"path": "f.txt"}})
	var seq sync.Mutex
	n := 0
	guarded := func(i int) error {
		seq.Lock()
		n++
		id := fmt.Sprintf("c%d", n)
		seq.Unlock()
		r, err := gws[i%len(gws)].Send(ctx, &agentv1.SendRequest{RequestId: id, Action: "mcp_call", Payload: args0})
		if err != nil {
			return err
		}
		if r.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE || r.GetResult().GetFields()["isError"].GetBoolValue() {
			return fmt.Errorf("mcp_call: %v %s", r.GetStatus(), r.GetReason())
		}
		return nil
	}

	// The direct path: the same server, one stdio client per "session".
	direct := make([]*mcp.ClientSession, c.sessions)
	for i := range direct {
		cmd := exec.Command(c.mcpBin)
		cmd.Dir = filepath.Join(dir, "data", "mcp", groups[i], "fs")
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpload", Version: "v1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return fmt.Errorf("direct MCP client: %w", err)
		}
		defer cs.Close()
		direct[i] = cs
	}
	directCall := func(i int) error {
		r, err := direct[i%len(direct)].CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "f.txt"}})
		if err != nil {
			return err
		}
		if r.IsError {
			return errors.New("read_file: tool error")
		}
		return nil
	}

	// One call each first: servers started, streams up.
	for i := range c.sessions {
		if err := guarded(i); err != nil {
			return fmt.Errorf("first guarded call: %w", err)
		}
	}
	d := openLoop(c, directCall)
	g := openLoop(c, guarded)
	fmt.Printf("mcpload: %d sessions, %.0f calls/s, %s measured per path\n", c.sessions, c.rate, c.duration)
	fmt.Printf("%-26s %8s %8s %8s %8s %8s %7s\n", "path", "calls", "p50", "p95", "p99", "p99.9", "errors")
	for _, row := range []struct {
		name string
		r    result
	}{{"direct stdio", d}, {"guarded (gateway+guard)", g}} {
		fmt.Printf("%-26s %8d %8s %8s %8s %8s %7d\n", row.name, len(row.r.lat), ms(pct(row.r.lat, 50)), ms(pct(row.r.lat, 95)),
			ms(pct(row.r.lat, 99)), ms(pct(row.r.lat, 99.9)), row.r.errors)
	}
	fmt.Printf("%-26s %8s %8s %8s %8s %8s\n", "added by the guarded path", "", ms(pct(g.lat, 50)-pct(d.lat, 50)), ms(pct(g.lat, 95)-pct(d.lat, 95)),
		ms(pct(g.lat, 99)-pct(d.lat, 99)), ms(pct(g.lat, 99.9)-pct(d.lat, 99.9)))
	if g.firstErr != nil || d.firstErr != nil {
		fmt.Printf("first errors: guarded %v, direct %v\n", g.firstErr, d.firstErr)
	}
	return nil
}

type result struct {
	lat      []time.Duration
	errors   int
	firstErr error
}

// openLoop issues calls at c.rate for warm-up + duration, each on its own
// goroutine at its scheduled time, and measures from that time.
func openLoop(c config, call func(i int) error) result {
	interval := time.Duration(float64(time.Second) / c.rate)
	total := int((c.warmup + c.duration) / interval)
	warm := int(c.warmup / interval)
	var (
		mu  sync.Mutex
		res result
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := call(i)
			took := time.Since(at)
			if i < warm {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errors++
				if res.firstErr == nil {
					res.firstErr = err
				}
				return
			}
			res.lat = append(res.lat, took)
		}()
	}
	wg.Wait()
	sort.Slice(res.lat, func(a, b int) bool { return res.lat[a] < res.lat[b] })
	return res
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }

// waitSockets waits for n gateway sockets of the runner's sessions.
func waitSockets(dir string, n int, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	for {
		socks, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
		if len(socks) >= n {
			sort.Strings(socks)
			return socks[:n], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d session sockets after %s", len(socks), n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
