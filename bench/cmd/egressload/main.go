// Command egressload measures the egress path of an agent's connection
// beside Squid (Debian's package) configured with the same allow rule:
// connection set-up (CONNECT → "200 Connection established" → one byte
// echoed back) at a steady rate, and bulk throughput through one tunnel.
//
// The guarded path is what a container's agent uses: clawguard-init's
// loopback forwarder → the session's egress socket on a real runner
// (process runtime) → a net.connect decision on the server (logged) → the
// destination. Squid listens on loopback with an ACL allowing the same
// destination. Both reach the same echo/bulk server on 127.0.0.1.
//
//	egressload -addr 127.0.0.1:7443 -token-file operator.token -runner-bin bin/clawguard-runner \
//	    -init-bin bin/clawguard-init -agent-bin bin/demo-agent -rate 200 -duration 20s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

type config struct {
	addr, tokenFile, runnerBin, initBin, agentBin, squidBin string
	rate                                                    float64
	duration, warmup                                        time.Duration
	bulkBytes                                               int64
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:7443", "server gRPC address")
	flag.StringVar(&c.tokenFile, "token-file", "", "the server's operator token file")
	flag.StringVar(&c.runnerBin, "runner-bin", "bin/clawguard-runner", "clawguard-runner binary")
	flag.StringVar(&c.initBin, "init-bin", "bin/clawguard-init", "clawguard-init binary (the in-container forwarder)")
	flag.StringVar(&c.agentBin, "agent-bin", "bin/demo-agent", "agent binary for the runner's session")
	flag.StringVar(&c.squidBin, "squid", "squid", "squid binary (Debian: apt-get install squid)")
	flag.Float64Var(&c.rate, "rate", 200, "connections per second, per path")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "measured duration of the set-up load")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "unmeasured warm-up at the same rate")
	flag.Int64Var(&c.bulkBytes, "bulk-bytes", 1<<30, "bytes downloaded through one tunnel for the throughput run (each path, twice)")
	flag.Parse()
	for _, p := range []*string{&c.runnerBin, &c.initBin, &c.agentBin} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "egressload:", err)
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
	dir, err := os.MkdirTemp("", "egl")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)

	target, err := startTarget()
	if err != nil {
		return err
	}
	defer target.Close()
	guarded, stop, err := startGuardedPath(ctx, c, reg, dir, target.port())
	if err != nil {
		return err
	}
	defer stop()
	squid, stopSquid, err := startSquid(c.squidBin, dir, target.port())
	if err != nil {
		return err
	}
	defer stopSquid()

	dest := fmt.Sprintf("127.0.0.1:%d", target.port())
	paths := []func() error{
		func() error { return setup(squid, dest) },
		func() error { return setup(guarded, dest) },
	}
	for i, p := range paths { // one each first: streams up, caches warm
		if err := p(); err != nil {
			return fmt.Errorf("first connection of path %d: %w", i, err)
		}
	}
	res := openLoop(c, paths)
	fmt.Printf("egressload: connection set-up (CONNECT, 200, one byte echoed) at %.0f/s per path (interleaved), %s measured\n", c.rate, c.duration)
	fmt.Printf("%-34s %8s %9s %9s %9s %9s %7s\n", "path", "conns", "p50", "p95", "p99", "p99.9", "errors")
	for i, name := range []string{"squid (same allow rule)", "clawguard (forwarder+runner+guard)"} {
		r := res[i]
		fmt.Printf("%-34s %8d %9s %9s %9s %9s %7d\n", name, len(r.lat), ms(pct(r.lat, 50)), ms(pct(r.lat, 95)), ms(pct(r.lat, 99)), ms(pct(r.lat, 99.9)), r.errors)
		if r.firstErr != nil {
			fmt.Printf("  first error: %v\n", r.firstErr)
		}
	}
	s, g := res[0], res[1]
	fmt.Printf("%-34s %8s %9s %9s %9s %9s\n", "added over squid", "", ms(pct(g.lat, 50)-pct(s.lat, 50)), ms(pct(g.lat, 95)-pct(s.lat, 95)),
		ms(pct(g.lat, 99)-pct(s.lat, 99)), ms(pct(g.lat, 99.9)-pct(s.lat, 99.9)))

	// Bulk: alternating pairs, each path twice.
	fmt.Printf("egressload: bulk download of %d MiB through one tunnel (alternating, twice each)\n", c.bulkBytes>>20)
	var rates [2][]float64
	for round := 0; round < 2; round++ {
		for i, p := range []dialer{squid, guarded} {
			mbs, err := bulk(p, dest, c.bulkBytes)
			if err != nil {
				return fmt.Errorf("bulk through path %d: %w", i, err)
			}
			rates[i] = append(rates[i], mbs)
		}
	}
	for i, name := range []string{"squid", "clawguard"} {
		fmt.Printf("  %-10s %8.0f MB/s %8.0f MB/s\n", name, rates[i][0], rates[i][1])
	}
	fmt.Printf("  clawguard / squid: %.2f\n", (rates[1][0]+rates[1][1])/(rates[0][0]+rates[0][1]))
	return nil
}
