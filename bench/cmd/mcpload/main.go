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
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
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
	// The runner starts both from other working directories.
	for _, p := range []*string{&c.agentBin, &c.mcpBin, &c.runnerBin} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
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

	socks, err := waitSockets(ctx, reg, groups, runnerID, filepath.Join(dir, "data", "sockets"), 60*time.Second)
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

	// The decision alone: Guard.Decide of the same mcp.call, as the runner
	// asks it (its token, the session asserted), to split the guarded cost.
	rconn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(rt.GetSecret())))
	if err != nil {
		return err
	}
	defer rconn.Close()
	guard := guardv1.NewGuardClient(rconn)
	sessions, err := sessionIDs(socks)
	if err != nil {
		return err
	}
	digest, err := mcpcall.Digest("fs", "read_file", map[string]any{"path": "f.txt"})
	if err != nil {
		return err
	}
	decideOnly := func(i int) error {
		actx := metadata.AppendToOutgoingContext(ctx, "x-clawguard-session", sessions[i%len(sessions)])
		r, err := guard.Decide(actx, &guardv1.DecideRequest{Action: mcpcall.CatalogAction, Resource: mcpcall.Resource("fs", "read_file", digest), Payload: args0})
		if err != nil {
			return err
		}
		if r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
			return fmt.Errorf("decide: %v", r.GetDecision())
		}
		return nil
	}

	// One call each first: servers started, streams up.
	for i := range c.sessions {
		if err := guarded(i); err != nil {
			return fmt.Errorf("first guarded call: %w", err)
		}
	}
	// The paths interleaved on one schedule (each at -rate), so each sees
	// the same machine: a shared machine's noise lands on all of them.
	res := openLoop(c, []func(int) error{directCall, guarded, decideOnly})
	d, g, o := res[0], res[1], res[2]
	fmt.Printf("mcpload: %d sessions, %.0f calls/s per path (interleaved), %s measured\n", c.sessions, c.rate, c.duration)
	fmt.Printf("%-30s %8s %9s %9s %9s %9s %7s\n", "path", "calls", "p50", "p95", "p99", "p99.9", "errors")
	for _, row := range []struct {
		name string
		r    result
	}{{"direct stdio", d}, {"guarded (gateway+guard)", g}, {"the decision alone", o}} {
		fmt.Printf("%-30s %8d %9s %9s %9s %9s %7d\n", row.name, len(row.r.lat), ms(pct(row.r.lat, 50)), ms(pct(row.r.lat, 95)),
			ms(pct(row.r.lat, 99)), ms(pct(row.r.lat, 99.9)), row.r.errors)
	}
	fmt.Printf("%-30s %8s %9s %9s %9s %9s\n", "added by the guarded path", "", ms(pct(g.lat, 50)-pct(d.lat, 50)), ms(pct(g.lat, 95)-pct(d.lat, 95)),
		ms(pct(g.lat, 99)-pct(d.lat, 99)), ms(pct(g.lat, 99.9)-pct(d.lat, 99.9)))
	for i, r := range res {
		if r.firstErr != nil {
			fmt.Printf("path %d first error: %v\n", i, r.firstErr)
		}
	}
	return nil
}

type result struct {
	lat      []time.Duration
	errors   int
	firstErr error
}

// openLoop issues calls of every path at c.rate each, interleaved (tick i
// runs path i mod len(paths)), for warm-up + duration, each on its own
// goroutine at its scheduled time, and measures from that time.
func openLoop(c config, paths []func(i int) error) []result {
	n := len(paths)
	interval := time.Duration(float64(time.Second) / (c.rate * float64(n)))
	total := int((c.warmup + c.duration) / interval)
	warm := int(c.warmup / interval)
	var (
		mu  sync.Mutex
		res = make([]result, n)
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := i % n
			err := paths[p](i / n)
			took := time.Since(at)
			if i < warm {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			r := &res[p]
			if err != nil {
				r.errors++
				if r.firstErr == nil {
					r.firstErr = err
				}
				return
			}
			r.lat = append(r.lat, took)
		}()
	}
	wg.Wait()
	for p := range res {
		sort.Slice(res[p].lat, func(a, b int) bool { return res[p].lat[a] < res[p].lat[b] })
	}
	return res
}

// sessionIDs are the sessions of the gateway sockets (<session>.sock).
func sessionIDs(socks []string) ([]string, error) {
	out := make([]string, len(socks))
	for i, s := range socks {
		out[i] = strings.TrimSuffix(filepath.Base(s), ".sock")
	}
	return out, nil
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }

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
