// Command mcpload measures what the guarded path adds to an allowed MCP
// tools/call, against the same MCP server called directly over stdio (the
// official Go SDK's client on the server's stdin and stdout):
//
//   - host: a real MCP host — the official Go SDK's client on
//     clawguard-mcp's stdio (-face-bin), which calls the tool <server>__<tool>
//     through the session's gateway — what an agent's MCP host does;
//   - gateway: the session's gateway alone (Send mcp_call) → the runner's
//     decision (mcp.call on Guard.DecideStream, logged) → the runner's
//     client → the same server;
//   - decide: Guard.Decide of the same call with the runner's token, to
//     split the cost.
//
// Open loop at -rate calls/s per path over -sessions sessions, the paths
// interleaved on one schedule (so each sees the same machine), latency from
// each call's scheduled time.
//
// It needs a running server (-addr, its operator token in -token-file), a
// clawguard-runner binary (started here, process runtime), clawguard-mcp
// for the host path, and a stdio MCP server with a read_file tool (the
// runner's test server, internal/mcphost/testdata/fsmcp). The sessions'
// agents only wait (-agent-bin: an agent that does nothing when empty), so
// the host path's clawguard-mcp is each session's only reader.
//
//	mcpload -addr 127.0.0.1:7443 -token-file operator.token -runner-bin bin/clawguard-runner \
//	    -face-bin bin/clawguard-mcp -mcp-bin bin/fsmcp -rate 20 -duration 20s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type config struct {
	addr, tokenFile, runnerBin, agentBin, faceBin, mcpBin string
	paths                                                 string
	rate                                                  float64
	sessions                                              int
	duration, warmup                                      time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:7443", "server gRPC address")
	flag.StringVar(&c.tokenFile, "token-file", "", "the server's operator token file")
	flag.StringVar(&c.runnerBin, "runner-bin", "bin/clawguard-runner", "clawguard-runner binary")
	flag.StringVar(&c.agentBin, "agent-bin", "", "agent binary for the runner's sessions (empty: one that only waits)")
	flag.StringVar(&c.faceBin, "face-bin", "bin/clawguard-mcp", "clawguard-mcp binary (the host path)")
	flag.StringVar(&c.mcpBin, "mcp-bin", "", "stdio MCP server with a read_file {path} tool")
	flag.StringVar(&c.paths, "paths", "direct,host,gateway,decide", "the paths measured, interleaved (direct is the baseline)")
	flag.Float64Var(&c.rate, "rate", 20, "tool calls per second of each path, over all sessions")
	flag.IntVar(&c.sessions, "sessions", 1, "agent sessions (groups) the calls are spread over")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "measured duration")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "unmeasured warm-up at the same rate")
	flag.Parse()
	// The runner starts them from other working directories.
	for _, p := range []*string{&c.agentBin, &c.mcpBin, &c.runnerBin, &c.faceBin} {
		if abs, err := filepath.Abs(*p); err == nil && *p != "" {
			*p = abs
		}
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "mcpload:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctx := context.Background()
	w, err := newWorld(ctx, c)
	if err != nil {
		return err
	}
	defer w.close()
	all := map[string]func(i int) error{"direct": w.direct, "host": w.host, "gateway": w.gateway, "decide": w.decide}
	var names []string
	var paths []func(int) error
	for _, name := range strings.Split(c.paths, ",") {
		p, ok := all[name]
		if !ok {
			return fmt.Errorf("-paths: no path %q (direct, host, gateway, decide)", name)
		}
		names, paths = append(names, name), append(paths, p)
	}
	// One call of each path first: servers started, streams up, tools listed.
	for i := range c.sessions {
		for k, p := range paths {
			if err := p(i); err != nil {
				return fmt.Errorf("first %s call: %w", names[k], err)
			}
		}
	}
	cpu := newCPUWatch(map[string][]int{"runner": {w.runnerPID}, "clawguard-mcp": w.facePIDs})
	time.AfterFunc(c.warmup, cpu.begin)
	res := openLoop(c, paths)
	cpu.end()
	report(c, names, res)
	guarded, host := 0, 0
	for i, name := range names {
		if name == "host" || name == "gateway" {
			guarded += len(res[i].lat)
		}
		if name == "host" {
			host = len(res[i].lat)
		}
	}
	fmt.Printf("CPU per guarded call: runner %s (over %d host and gateway calls), clawguard-mcp %s (over %d host calls)\n",
		cpu.perCall("runner", guarded), guarded, cpu.perCall("clawguard-mcp", host), host)
	return nil
}

// report prints each path's latencies and, against direct, what it adds.
func report(c config, names []string, res []result) {
	fmt.Printf("mcpload: %d session(s), %.0f calls/s per path (interleaved), %s measured\n", c.sessions, c.rate, c.duration)
	fmt.Printf("%-22s %8s %9s %9s %9s %9s %7s\n", "path", "calls", "p50", "p95", "p99", "p99.9", "errors")
	base := -1
	for i, name := range names {
		r := res[i]
		fmt.Printf("%-22s %8d %9s %9s %9s %9s %7d\n", name, len(r.lat), ms(pct(r.lat, 50)), ms(pct(r.lat, 95)),
			ms(pct(r.lat, 99)), ms(pct(r.lat, 99.9)), r.errors)
		if name == "direct" {
			base = i
		}
	}
	if base >= 0 {
		d := res[base].lat
		for i, name := range names {
			if i == base || name == "decide" {
				continue
			}
			g := res[i].lat
			fmt.Printf("%-22s %8s %9s %9s %9s %9s\n", "added by "+name, "", ms(pct(g, 50)-pct(d, 50)), ms(pct(g, 95)-pct(d, 95)),
				ms(pct(g, 99)-pct(d, 99)), ms(pct(g, 99.9)-pct(d, 99.9)))
		}
	}
	for i, r := range res {
		if r.firstErr != nil {
			fmt.Printf("%s: first error: %v\n", names[i], r.firstErr)
		}
	}
}
