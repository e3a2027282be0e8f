// Command modelload measures the model gateway beside a bare
// httputil.ReverseProxy to the same fake provider, in one run: the time to
// the first byte of a streamed Messages call at a steady rate (p50, p99:
// what the gateway adds — reading the call, its model.call decision, its
// reservation), and server-sent events per second through one long stream.
//
// The guarded path is what an agent uses: the runner (process runtime)
// serves its session the gateway at the address and with the token it puts
// in the agent's environment (ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN); a
// small agent script writes that environment down for the load to read.
// The provider, the gateway's and the bare proxy's, is this program's own,
// on loopback over plain HTTP (the provider's TLS would cost both paths the
// same).
//
//	modelload -addr 127.0.0.1:7443 -token-file operator.token -runner-bin bin/clawguard-runner -rate 100 -duration 20s
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
	addr, tokenFile, runnerBin string
	rate                       float64
	duration, warmup           time.Duration
	events                     int
	// gateway and token, when set, name a gateway already serving (no
	// runner is started): its base URL and a session's token.
	gateway, token string
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:7443", "server gRPC address")
	flag.StringVar(&c.tokenFile, "token-file", "", "the server's operator token file")
	flag.StringVar(&c.runnerBin, "runner-bin", "bin/clawguard-runner", "clawguard-runner binary")
	flag.Float64Var(&c.rate, "rate", 100, "streamed calls per second, per path")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "measured duration of the first-byte load")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "unmeasured warm-up at the same rate")
	flag.IntVar(&c.events, "events", 200_000, "events of the throughput stream (each path, twice)")
	flag.StringVar(&c.gateway, "gateway", "", "a gateway's base URL already serving (skips the runner; needs -token)")
	flag.StringVar(&c.token, "token", "", "the session token of -gateway")
	flag.Parse()
	if abs, err := filepath.Abs(c.runnerBin); err == nil {
		c.runnerBin = abs
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "modelload:", err)
		os.Exit(1)
	}
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

func run(c config) error {
	p, err := startProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	bare, err := startBareProxy(p.url)
	if err != nil {
		return err
	}
	defer bare.Close()
	gw := endpoint{base: c.gateway, token: c.token}
	if gw.base == "" {
		g, stop, err := startGuardedPath(c, p.url)
		if err != nil {
			return err
		}
		defer stop()
		gw = g
	}
	paths := []endpoint{{base: bare.url, token: "bare"}, gw}
	for i, e := range paths { // one each first: streams up, caches warm
		if _, err := firstByte(e); err != nil {
			return fmt.Errorf("first call of path %d: %w", i, err)
		}
	}
	res := openLoop(c, paths)
	fmt.Printf("modelload: time to the first byte of a streamed /v1/messages at %.0f/s per path (interleaved), %s measured\n", c.rate, c.duration)
	fmt.Printf("%-36s %8s %9s %9s %9s %9s %7s\n", "path", "calls", "p50", "p95", "p99", "p99.9", "errors")
	names := []string{"bare httputil.ReverseProxy", "clawguard model gateway"}
	for i, r := range res {
		fmt.Printf("%-36s %8d %9s %9s %9s %9s %7d\n", names[i], len(r.lat), ms(pct(r.lat, 50)), ms(pct(r.lat, 95)), ms(pct(r.lat, 99)),
			ms(pct(r.lat, 99.9)), r.errors)
		if r.firstErr != nil {
			fmt.Printf("  first error: %v\n", r.firstErr)
		}
	}
	b, g := res[0], res[1]
	fmt.Printf("%-36s %8s %9s %9s %9s %9s\n", "added by the gateway", "", ms(pct(g.lat, 50)-pct(b.lat, 50)), ms(pct(g.lat, 95)-pct(b.lat, 95)),
		ms(pct(g.lat, 99)-pct(b.lat, 99)), ms(pct(g.lat, 99.9)-pct(b.lat, 99.9)))

	fmt.Printf("modelload: one stream of %d events (alternating, twice each)\n", c.events)
	var rates [2][]float64
	for round := 0; round < 2; round++ {
		for i, e := range paths {
			eps, err := streamRate(e, c.events)
			if err != nil {
				return fmt.Errorf("stream through path %d: %w", i, err)
			}
			rates[i] = append(rates[i], eps)
		}
	}
	for i, name := range names {
		fmt.Printf("  %-28s %10.0f events/s %10.0f events/s\n", name, rates[i][0], rates[i][1])
	}
	fmt.Printf("  gateway / bare: %.2f\n", (rates[1][0]+rates[1][1])/(rates[0][0]+rates[0][1]))
	return nil
}

// startGuardedPath makes a group given a provider at the fake one, a runner
// (process runtime) hosting one session of it whose agent writes its
// environment down, and answers the gateway as that agent has it.
func startGuardedPath(c config, providerURL string) (endpoint, func(), error) {
	ctx := context.Background()
	tok, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return endpoint{}, nil, err
	}
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(strings.TrimSpace(string(tok)))))
	if err != nil {
		return endpoint{}, nil, err
	}
	reg := guardv1.NewRegistryClient(conn)
	stamp := time.Now().UnixNano() % 1e9
	name := fmt.Sprintf("modelload-%d", stamp)
	cred := "sk-modelload"
	if _, err := reg.SetModelProvider(ctx, &guardv1.SetModelProviderRequest{Name: name, Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC,
		BaseUrl: providerURL, Credential: &cred}); err != nil {
		return endpoint{}, nil, fmt.Errorf("provider: %w", err)
	}
	g, err := reg.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: name})
	if err != nil {
		return endpoint{}, nil, fmt.Errorf("create group: %w", err)
	}
	group := g.GetGroup().GetId()
	if _, err := reg.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: group, Providers: []string{name}}); err != nil {
		return endpoint{}, nil, fmt.Errorf("give the group its provider: %w", err)
	}
	dir, err := os.MkdirTemp("", "mdl")
	if err != nil {
		return endpoint{}, nil, err
	}
	stop, err := startRunner(c, reg, dir, name, group)
	if err != nil {
		os.RemoveAll(dir)
		return endpoint{}, nil, err
	}
	e, err := agentEndpoint(filepath.Join(dir, "agent.env"), 60*time.Second)
	if err != nil {
		stop()
		os.RemoveAll(dir)
		return endpoint{}, nil, err
	}
	return e, func() { stop(); conn.Close(); os.RemoveAll(dir) }, nil
}
