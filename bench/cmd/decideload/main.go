// Command decideload is a load generator for Guard.Decide and
// Guard.DecideStream. Open loop (the default): requests are issued at a
// fixed arrival rate whatever the server's latency (latency is measured from
// each request's scheduled time, so a stalled server cannot hide its
// queueing — no coordinated omission). Closed loop (-closed N): N requests
// always in flight, for the maximum throughput.
//
// It sets up its own fixture in the server's database — -groups agent
// groups with a session each on one runner, and -destinations random
// "A may send to B" pairs — and draws each check uniformly: half from the
// destination pairs (allowed), half from pairs without one (denied), so
// every decision reads destination, target group and policy live and
// writes its log row. It reports p50/p95/p99/p99.9, decisions/s completed,
// CPU per decision of the server (-server-pid, or found by name) and of
// Postgres (every "postgres" process, from /proc), and WAL bytes written
// per decision (pg_current_wal_lsn).
//
// -approvals R runs, in parallel with the decision load (either mode, open
// or closed loop) and over the same warm-up and measured period, approval
// round trips at R/s, open loop (as BenchmarkApprovalRoundTrip in
// server/internal/approvals does them one at a time), on a runner, session
// and owner user of its own: the runner's decision of the agent's
// self_mod.install_packages HOLDs → the owner's Approvals.Resolve approves →
// the replay push arrives on the runner's Registry.Connect stream (acked) →
// the runner's decision with grant = hold id is ALLOW (both asked over one
// Guard.DecideStream, as the runner asks). It reports the
// measured round trips, their failures by step and kind (no push within
// 10 s after Resolve is one), and p50/p95/p99/p99.9 of approve → allowed,
// the whole loop (from the scheduled time), Resolve, push arrival after
// Resolve returned, and the replay Decide. Like the server's benchmark it
// replays but never applies (ApplyAction), so in a run longer than the
// server's replay grace (30 s) the reconciler re-sends the early replays
// (shown as stray replay pushes, acked); at the end it gives its approved
// holds up and stops its session, so nothing is re-sent after it.
//
//	decideload -database-url URL -addr 127.0.0.1:7443 -mode unary -rate 2000 -duration 20s
//	decideload ... -mode unary -closed 512            (closed loop: max throughput)
//	decideload ... -mode stream -rate 20000 -streams 4
//	decideload ... -mode unary -find-max   (steps the rate up until p99 or errors break)
//	decideload ... -mode unary -rate 2000 -approvals 100   (approval round trips alongside)
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

type config struct {
	dbURL, addr, mode, metrics string
	rate                       float64
	duration, warmup           time.Duration
	conns, streams, groups     int
	maxInFlight                int
	findMax                    bool
	step                       float64
	p99Target                  time.Duration
	destinations, closed       int
	honourRetry                bool
	serverPID                  int
	approvals                  float64
	report, label              string
	reask                      bool
	reaskDeadline              time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.dbURL, "database-url", os.Getenv("CLAWGUARD_DATABASE_URL"), "the server's database (fixture setup)")
	flag.StringVar(&c.addr, "addr", "127.0.0.1:7443", "server gRPC address")
	flag.StringVar(&c.mode, "mode", "unary", "unary (Guard.Decide), stream (Guard.DecideStream), health (grpc.health.v1 Check on the same open loop: the machine's floor for a unary call), durable (that health check, then one single-row INSERT committed durably by this generator: the floor of an answer that waits for a durable write), or openfga (the same checks as OpenFGA Check calls against -addr, its fixture written through OpenFGA's API: the side-by-side run)")
	flag.StringVar(&c.metrics, "metrics", "", "server metrics URL (http://host:port/metrics) to estimate heap per in-flight decision")
	flag.Float64Var(&c.rate, "rate", 5000, "arrival rate, decisions per second")
	flag.DurationVar(&c.duration, "duration", 15*time.Second, "measured duration")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "unmeasured warm-up at the same rate")
	flag.IntVar(&c.conns, "conns", 4, "gRPC connections (unary)")
	flag.IntVar(&c.streams, "streams", 4, "concurrent DecideStreams (stream mode)")
	flag.IntVar(&c.groups, "groups", 10000, "agent groups (and sessions) in the fixture")
	flag.IntVar(&c.destinations, "destinations", 50000, "random destination pairs in the fixture (the allowed half of the checks)")
	flag.BoolVar(&c.honourRetry, "honour-retry", true, "closed loop: a shed decision (ResourceExhausted) waits for the server's retry hint before its worker asks again, as the runner does")
	flag.IntVar(&c.closed, "closed", 0, "closed loop with this many requests in flight (0 = open loop at -rate)")
	flag.IntVar(&c.serverPID, "server-pid", 0, "clawguard-server's pid for CPU per decision (0 = the one process named clawguard-server)")
	flag.IntVar(&c.maxInFlight, "max-in-flight", 20000, "requests outstanding before the generator counts overload")
	flag.BoolVar(&c.findMax, "find-max", false, "step the rate up by -step until p99 > -p99 or errors, report the last good rate")
	flag.Float64Var(&c.step, "step", 1000, "rate increment for -find-max")
	flag.DurationVar(&c.p99Target, "p99", 2*time.Millisecond, "p99 target for -find-max")
	flag.Float64Var(&c.approvals, "approvals", 0, "approval round trips per second alongside the decisions (hold → owner approves → replay push → replay ALLOW), open loop; 0 = off")
	flag.BoolVar(&c.reask, "reask", false, "open loop, unary: a shed decision is asked again after the server's hint, doubled for each refusal in a row and jittered, as the runner does, until -reask-deadline after it was scheduled; latency is from the scheduled time, \"from send\" from the attempt that was answered, and answered/s counts answers given in the measured period")
	flag.DurationVar(&c.reaskDeadline, "reask-deadline", 10*time.Second, "with -reask: how long after its scheduled time a decision is still asked again")
	flag.StringVar(&c.report, "report", "", "append each run's figures to this file as a JSON line (for -summarize)")
	flag.StringVar(&c.label, "label", "", "the run's name in the -report file")
	summary := flag.String("summarize", "", "print the runs of this -report file as a Markdown table, and exit")
	flag.Parse()
	if *summary != "" {
		if err := summarize(*summary, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "decideload:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "decideload:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctx := context.Background()
	if c.mode == "durable" {
		// The floor of a durable answer is measured against a durable cluster only.
		durable, err := isDurableCommitted(ctx, c.dbURL)
		if err != nil {
			return fmt.Errorf("-mode durable: %w", err)
		}
		if !durable {
			return errors.New("-mode durable: this Postgres runs with fsync off, so its commits are no floor of a durable answer (make bench starts one with fsync on)")
		}
	}
	if c.reask && (c.mode != "unary" || c.closed > 0) {
		return errors.New("-reask is for the open loop of -mode unary (a closed loop honours the hint with -honour-retry)")
	}
	setUp := setup
	if c.mode == "openfga" {
		setUp = func(ctx context.Context, _ string, n, dests int) (*fixture, error) {
			return setupOpenFGA(ctx, c, n, dests)
		}
	}
	fx, err := setUp(ctx, c.dbURL, c.groups, c.destinations)
	if err != nil {
		return err
	}
	fx.draw(1 << 20)
	fmt.Printf("fixture: %d groups, %d destinations (half the checks allowed), runner %s; mode %s, %d conns/streams\n",
		c.groups, c.destinations, fx.runner, c.mode, max(c.conns, c.streams))
	acct, err := newAccounting(ctx, c.dbURL, c.serverPID)
	if err != nil {
		return err
	}
	defer acct.close()
	var appr *approvals
	if c.approvals < 0 {
		return fmt.Errorf("-approvals %v: want 0 (off) or a rate per second", c.approvals)
	}
	if c.approvals > 0 {
		if appr, err = setupApprovals(ctx, c); err != nil {
			return err
		}
		defer appr.close()
		fmt.Printf("approvals: %.0f round trips/s on runner %s (own session, owner user)\n", c.approvals, appr.runner)
	}
	if err := awaitSnapshot(ctx, c); err != nil {
		return err
	}
	if err := checkpoint(ctx, c.dbURL); err != nil {
		return err
	}
	if c.closed > 0 {
		before := acct.sample(ctx)
		r, ar, err := alongside(ctx, c, appr, func() (*result, error) { return closedLoop(ctx, c, fx) })
		if err != nil {
			return err
		}
		r.cost = acct.since(ctx, before, r.completed)
		r.print()
		ar.print()
		return c.record(r, ar)
	}
	if !c.findMax {
		before := acct.sample(ctx)
		r, ar, err := alongside(ctx, c, appr, func() (*result, error) { return measure(ctx, c, fx, c.rate) })
		if err != nil {
			return err
		}
		r.cost = acct.since(ctx, before, r.completed)
		r.print()
		ar.print()
		return c.record(r, ar)
	}
	var best *result
	for rate := c.rate; ; rate += c.step {
		r, ar, err := alongside(ctx, c, appr, func() (*result, error) { return measure(ctx, c, fx, rate) })
		if err != nil {
			return err
		}
		r.print()
		ar.print()
		if err := c.record(r, ar); err != nil {
			return err
		}
		if r.errors > 0 || r.overload > 0 || r.pct(0.99) > c.p99Target || r.achieved < 0.98*rate {
			break
		}
		best = r
	}
	if best == nil {
		fmt.Println("no rate met the target")
		return nil
	}
	fmt.Printf("max sustained: %.0f decisions/s with p99 %s\n", best.rate, best.pct(0.99))
	return nil
}

// record appends the run to the -report file, if one is named.
func (c config) record(r *result, ar *approvalResult) error {
	if c.report == "" {
		return nil
	}
	return appendReport(c.report, newReportRow(c, r, ar))
}

// fixture is the load's world: groups g_i each with a session s_i on one
// runner, random destinations g_a → g_b, and the runner's token.
type fixture struct {
	runner, token string
	groups        []string
	sessions      []string
	pairs         [][2]int        // the destination pairs (indexes into groups)
	allowed       map[[2]int]bool // pairs with a destination
	draws         [][2]int        // the checks, in order
	rng           *mrand.Rand
	fga           *fgaStore // -mode openfga: the store the checks are asked of
}

func setup(ctx context.Context, dbURL string, n, dests int) (*fixture, error) {
	if dbURL == "" {
		return nil, errors.New("-database-url is required (fixture setup)")
	}
	if n < 2 || dests < 1 || dests > n*(n-1)/2 {
		return nil, fmt.Errorf("-groups %d / -destinations %d: want at least 2 groups and 1..n(n-1)/2 destinations", n, dests)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	fx := newFixture(n, dests)
	secret := "cgt_" + base64.RawURLEncoding.EncodeToString([]byte(randHex(24)))
	hash := sha256.Sum256([]byte(secret))
	fx.token = secret
	var from, to []string
	for _, p := range fx.pairs {
		from, to = append(from, fx.groups[p[0]]), append(to, fx.groups[p[1]])
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO runners (id, lease_expires_at) VALUES ($1, now() + interval '1 hour')`, fx.runner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tokens (id, kind, name, hash, runner_id) VALUES ($1, 'runner', 'decideload', $2, $3)`,
			"tok_"+fx.runner, hash[:], fx.runner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO agent_groups (id, name) SELECT g, g FROM unnest($1::text[]) AS g`, fx.groups); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (id, agent_group_id, runner_id) SELECT s, g, $3 FROM unnest($1::text[], $2::text[]) AS x(s, g)`,
			fx.sessions, fx.groups, fx.runner); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id)
			SELECT f, t, t FROM unnest($1::text[], $2::text[]) AS x(f, t)`, from, to)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE agent_groups, sessions, agent_destinations`); err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	return fx, nil
}

// newFixture names n groups (each with a session) and draws dests distinct
// ordered pairs of them, the destinations: the same pairs for the same n and
// dests whichever system is measured (a fixed seed), so a side-by-side run
// asks both the same questions.
func newFixture(n, dests int) *fixture {
	tag := randHex(4)
	fx := &fixture{runner: "bench-" + tag, allowed: map[[2]int]bool{}, rng: mrand.New(mrand.NewPCG(1, 2))}
	for i := range n {
		fx.groups = append(fx.groups, fmt.Sprintf("bench-%s-g%d", tag, i))
		fx.sessions = append(fx.sessions, fmt.Sprintf("bench-%s-s%d", tag, i))
	}
	for len(fx.pairs) < dests {
		a, b := fx.rng.IntN(n), fx.rng.IntN(n)
		if a == b || fx.allowed[[2]int{a, b}] {
			continue
		}
		fx.allowed[[2]int{a, b}] = true
		fx.pairs = append(fx.pairs, [2]int{a, b})
	}
	return fx
}

// request i is drawn uniformly: even i from the destination pairs (allow),
// odd i from pairs without a destination (deny). Draws are precomputed so
// the generator's own cost stays out of the measurement.
func (fx *fixture) request(i int) *guardv1.DecideRequest {
	p := fx.draws[i%len(fx.draws)]
	return &guardv1.DecideRequest{
		Action:   "a2a.send",
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: fx.groups[p[0]], SessionId: fx.sessions[p[0]]}}},
		Resource: map[string]string{"to": fx.groups[p[1]]},
	}
}

// draw precomputes n checks, half allowed.
func (fx *fixture) draw(n int) {
	fx.draws = make([][2]int, n)
	for i := range fx.draws {
		if i%2 == 0 {
			fx.draws[i] = fx.pairs[fx.rng.IntN(len(fx.pairs))]
			continue
		}
		for {
			a, b := fx.rng.IntN(len(fx.groups)), fx.rng.IntN(len(fx.groups))
			if a != b && !fx.allowed[[2]int{a, b}] {
				fx.draws[i] = [2]int{a, b}
				break
			}
		}
	}
}

type result struct {
	mode              string
	rate, achieved    float64
	lat               []time.Duration // from the scheduled time (open loop)
	svc               []time.Duration // from the actual send (excludes the generator's own timer lag)
	errors, overload  int64
	warmErrors        int64 // of errors, those of requests scheduled in the warm-up
	refusals          int64 // -reask: every shed attempt, re-asked or not
	calls             int64 // every call (or frame) sent, answered or refused, warm-up included
	reask             bool
	errCodes          string // errors by gRPC code, e.g. "ResourceExhausted=12"
	denies            int64
	heapPerInFlight   float64
	meanInFlight      float64
	heapIdle, heapRun float64
	cost              cost
	completed         int              // every answered decision, warm-up included (what the CPU and WAL were spent on)
	admitted          *admittedSummary // the server's view of the measured period's admitted decisions (-metrics)
}

func (r *result) pct(p float64) time.Duration { return pct(r.lat, p) }

// perCallServerCPU is the server's CPU per call it was sent, answered or
// refused: past the limit, what a refusal costs shows here.
func (r *result) perCallServerCPU() float64 {
	if r.calls == 0 {
		return 0
	}
	return r.cost.serverCPU * float64(r.cost.decisions) / float64(r.calls)
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func (r *result) print() {
	fmt.Printf("%-6s rate %6.0f/s  achieved %8.1f/s  n=%d  p50 %-9s p95 %-9s p99 %-9s p99.9 %-9s max %-9s errors %d (warm-up %d) overload %d non-allow %d\n",
		r.mode, r.rate, r.achieved, len(r.lat), r.pct(0.50).Round(time.Microsecond), r.pct(0.95).Round(time.Microsecond),
		r.pct(0.99).Round(time.Microsecond), r.pct(0.999).Round(time.Microsecond), r.pct(1).Round(time.Microsecond),
		r.errors, r.warmErrors, r.overload, r.denies)
	if r.errCodes != "" {
		fmt.Printf("       errors by code: %s\n", r.errCodes)
	}
	if r.reask {
		fmt.Printf("       re-asked as the runner does: %d refusals; errors are decisions still refused %s after they were scheduled\n", r.refusals, "-reask-deadline")
	}
	fmt.Printf("       from send (no generator lag): p50 %-9s p95 %-9s p99 %-9s p99.9 %s\n",
		pct(r.svc, 0.50).Round(time.Microsecond), pct(r.svc, 0.95).Round(time.Microsecond),
		pct(r.svc, 0.99).Round(time.Microsecond), pct(r.svc, 0.999).Round(time.Microsecond))
	if a := r.admitted; a != nil {
		fmt.Printf("       in the server, from admission to answer (%s): admitted p50 / p99 %s ms over %.0f decisions\n",
			admittedMetric, a, a.N)
	}
	if r.cost.decisions > 0 {
		fmt.Printf("       per decision: server CPU %.1f µs, Postgres CPU %.1f µs, WAL %.0f bytes (over %d answered decisions, warm-up included); this generator's CPU %.1f µs\n",
			r.cost.serverCPU, r.cost.pgCPU, r.cost.walBytes, r.cost.decisions, r.cost.generatorCPU)
		if r.calls > int64(r.cost.decisions) {
			fmt.Printf("       per call, answered or refused: server CPU %.1f µs (over %d calls)\n", r.perCallServerCPU(), r.calls)
		}
	}
	if r.heapPerInFlight > 0 {
		fmt.Printf("       server heap in use: idle %.1f MiB, under load %.1f MiB; mean in flight %.1f → %.1f KiB per in-flight decision (upper bound)\n",
			r.heapIdle/(1<<20), r.heapRun/(1<<20), r.meanInFlight, r.heapPerInFlight/1024)
	}
}

// unaryCall is the open loop's call: Guard.Decide, or for -mode health the
// health check on the same connections, answered as an ALLOW so it counts
// like a decision (the floor: transport, the server's interceptors, no guard;
// -mode durable adds a durable commit to it, durable.go).
func unaryCall(mode string, fx *fixture, conns []*grpc.ClientConn) func(ctx context.Context, i int, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	n := len(conns)
	if mode == "openfga" {
		return fx.fga.checker(conns)
	}
	if mode == "health" {
		clients := make([]healthpb.HealthClient, n)
		for i := range clients {
			clients[i] = healthpb.NewHealthClient(conns[i])
		}
		allowed := &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}}
		return func(ctx context.Context, i int, _ *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
			if _, err := clients[i%n].Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				return nil, err
			}
			return allowed, nil
		}
	}
	clients := make([]guardv1.GuardClient, n)
	for i := range clients {
		clients[i] = guardv1.NewGuardClient(conns[i])
	}
	return func(ctx context.Context, i int, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
		return clients[i%n].Decide(ctx, req)
	}
}

func dial(c config, token string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		// As the runner dials: fixed flow-control windows.
		grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(8 << 20)}
	if token != "" { // OpenFGA runs without authentication
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return grpc.NewClient(c.addr, opts...)
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// measure runs warm-up + measured period at a fixed rate.
func measure(ctx context.Context, c config, fx *fixture, rate float64) (*result, error) {
	n := max(c.conns, c.streams)
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		cc, err := dial(c, fx.token)
		if err != nil {
			return nil, err
		}
		defer cc.Close()
		conns[i] = cc
	}
	total := int((c.warmup + c.duration).Seconds() * rate)
	warm := int(c.warmup.Seconds() * rate)
	lat := make([]time.Duration, total)
	sent := make([]time.Time, total) // when the request actually left (generator lag = sent - scheduled)
	svc := make([]time.Duration, total)
	done := make([]bool, total)
	answeredAt := make([]time.Time, total) // -reask: answers are counted when given
	var errs, warmErrs, overload, denies, refusals, calls atomic.Int64
	var inflight atomic.Int64
	var inflightSum, inflightSamples atomic.Int64
	errCodes := &codeCounts{}
	record := func(i int, sched time.Time, resp *guardv1.DecideResponse, err error) {
		inflight.Add(-1)
		if err != nil {
			errs.Add(1)
			if i < warm {
				warmErrs.Add(1)
			}
			errCodes.add(err)
			return
		}
		if resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
			denies.Add(1)
		}
		now := time.Now()
		lat[i] = now.Sub(sched)
		svc[i] = now.Sub(sent[i])
		answeredAt[i] = now
		done[i] = true
	}

	heapIdle := scrapeHeap(c.metrics)
	var heapRun float64
	var admittedBefore *buckets // at the end of the warm-up
	admittedMarked := false
	start := time.Now().Add(50 * time.Millisecond)
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	sampleStop, sampleDone := make(chan struct{}), make(chan struct{})
	go func() { // in-flight sampling (Little's law cross-check) and heap under load
		defer close(sampleDone)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		mid := start.Add(c.warmup + c.duration/2)
		for {
			select {
			case <-sampleStop:
				return
			case now := <-t.C:
				if now.After(start.Add(c.warmup)) {
					if !admittedMarked {
						admittedMarked, admittedBefore = true, scrapeBuckets(c.metrics, admittedMetric)
					}
					inflightSum.Add(inflight.Load())
					inflightSamples.Add(1)
				}
				if heapRun == 0 && now.After(mid) {
					heapRun = scrapeHeap(c.metrics)
				}
			}
		}
	}()

	switch c.mode {
	case "unary", "health", "openfga", "durable":
		decide := unaryCall(c.mode, fx, conns)
		if c.mode == "durable" {
			call, closeFloor, err := durableCall(ctx, c.dbURL, conns)
			if err != nil {
				return nil, err
			}
			defer closeFloor()
			decide = call
		}
		pool := newSenders()
		defer pool.close()
		pace(start, interval, total, func(i int, sched time.Time) bool {
			if inflight.Load() >= int64(c.maxInFlight) {
				overload.Add(1)
				return true
			}
			inflight.Add(1)
			wg.Add(1)
			sent[i] = time.Now()
			pool.run(func() {
				defer wg.Done()
				if !c.reask {
					calls.Add(1)
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					resp, err := decide(cctx, i, fx.request(i))
					record(i, sched, resp, err)
					return
				}
				deadline := sched.Add(c.reaskDeadline)
				var waits reaskWaits
				for {
					calls.Add(1)
					cctx, cancel := context.WithDeadline(ctx, deadline)
					resp, err := decide(cctx, i, fx.request(i))
					cancel()
					if hint, shed := shedDelay(err); shed {
						refusals.Add(1)
						if w := waits.next(hint); time.Now().Add(w).Before(deadline) {
							time.Sleep(w)
							sent[i] = time.Now()
							continue
						}
					}
					record(i, sched, resp, err)
					return
				}
			})
			return true
		})
		wg.Wait()
	case "stream":
		per := make([][]int, c.streams)
		for i := range total {
			per[i%c.streams] = append(per[i%c.streams], i)
		}
		sched := func(i int) time.Time { return start.Add(time.Duration(i) * interval) }
		// One pacer for every stream: each stream's sender takes its due
		// requests from a queue long enough never to hold the pacer up.
		queues := make([]chan int, c.streams)
		for s := range c.streams {
			queues[s] = make(chan int, len(per[s]))
			stream, err := guardv1.NewGuardClient(conns[s]).DecideStream(ctx)
			if err != nil {
				return nil, err
			}
			wg.Add(2)
			go func() { // sender
				defer wg.Done()
				for i := range queues[s] {
					calls.Add(1)
					if err := stream.Send(&guardv1.DecideStreamRequest{CorrelationId: strconv.Itoa(i), Request: fx.request(i)}); err != nil {
						errs.Add(1)
						return
					}
				}
				_ = stream.CloseSend()
			}()
			go func() { // receiver
				defer wg.Done()
				for {
					r, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						return
					}
					if err != nil {
						errs.Add(1)
						return
					}
					i, _ := strconv.Atoi(r.GetCorrelationId())
					var rerr error
					if e := r.GetError(); e != nil {
						// The frame's code, so refusals count as ResourceExhausted.
						rerr = status.Error(codes.Code(e.GetCode()), e.GetMessage())
					}
					record(i, sched(i), r.GetResponse(), rerr)
				}
			}()
		}
		pace(start, interval, total, func(i int, _ time.Time) bool {
			inflight.Add(1)
			sent[i] = time.Now()
			queues[i%c.streams] <- i
			return true
		})
		for _, q := range queues {
			close(q)
		}
		wg.Wait()
	default:
		return nil, fmt.Errorf("-mode %q: want unary, stream, health, durable or openfga", c.mode)
	}
	close(sampleStop)
	<-sampleDone
	admitted := summarizeAdmitted(scrapeBuckets(c.metrics, admittedMetric).since(admittedBefore))
	elapsed := time.Since(start.Add(c.warmup))
	measuredFrom, measuredTo := start.Add(c.warmup), start.Add(c.warmup+c.duration)
	r := &result{mode: c.mode, rate: rate, errors: errs.Load(), warmErrors: warmErrs.Load(), overload: overload.Load(), denies: denies.Load(), heapIdle: heapIdle, heapRun: heapRun,
		refusals: refusals.Load(), reask: c.reask, calls: calls.Load(),
		errCodes: errCodes.String(), admitted: admitted}
	completed := 0
	for i := range total {
		if !done[i] {
			continue
		}
		r.completed++
		if i >= warm {
			r.lat = append(r.lat, lat[i])
			r.svc = append(r.svc, svc[i])
			completed++
		}
	}
	sortDurations(r.lat)
	sortDurations(r.svc)
	r.achieved = float64(completed) / elapsed.Seconds()
	if c.reask {
		// Goodput: the answers given in the measured period, whenever
		// their decisions were first asked (re-asks land later).
		given := 0
		for i := range total {
			if done[i] && !answeredAt[i].Before(measuredFrom) && answeredAt[i].Before(measuredTo) {
				given++
			}
		}
		r.achieved = float64(given) / c.duration.Seconds()
	}
	if s := inflightSamples.Load(); s > 0 {
		r.meanInFlight = float64(inflightSum.Load()) / float64(s)
	}
	// Below a few dozen in flight the heap delta is GC slack, not decisions.
	if heapIdle > 0 && heapRun > 0 && r.meanInFlight >= 20 {
		r.heapPerInFlight = (heapRun - heapIdle) / r.meanInFlight
	}
	return r, nil
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(a, b int) bool { return d[a] < d[b] }) }

// scrapeHeap reads go_memstats_heap_inuse_bytes from a metrics endpoint (0 when unavailable).
func scrapeHeap(url string) float64 {
	v, _ := scrapeMetric(url, "go_memstats_heap_inuse_bytes")
	return v
}

// scrapeMetric reads one sample from a metrics endpoint; name is the
// series as exposed (with its labels, if any).
func scrapeMetric(url, name string) (float64, bool) {
	if url == "" {
		return 0, false
	}
	resp, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// awaitSnapshot waits until the server's fact snapshot has applied the
// fixture (its revision metric reaches the database's), so the warm-up
// starts from the steady state instead of the catch-up of a bulk load
// (decisions for sessions the copy does not know yet are made live).
// Without -metrics, or with the snapshot off, it returns at once.
// checkpoint flushes the fixture's writes to disk before the measured load:
// otherwise the checkpoint that writes them (timed, spread over minutes)
// lands in some runs and not others, and its data-file fsyncs stall the
// WAL flushes that durable commits wait for. Every run starts from the
// same clean cluster, whichever system it measures.
func checkpoint(ctx context.Context, dbURL string) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		// A database user without the right (a superuser or pg_checkpoint
		// member may) still gets its run, said to be without one.
		fmt.Printf("no checkpoint before the load (%v): a checkpoint during the run may stall its commits\n", err)
	}
	return nil
}

func awaitSnapshot(ctx context.Context, c config) error {
	// A server with the snapshot on made its first full load at boot,
	// seconds before the fixture was in; one with it off never does.
	if loads, ok := scrapeMetric(c.metrics, `clawguard_guard_snapshot_refreshes_total{kind="full"}`); !ok || loads == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return fmt.Errorf("await snapshot: %w", err)
	}
	defer conn.Close(ctx)
	var want int64
	if err := conn.QueryRow(ctx, `SELECT rev FROM fact_revision`).Scan(&want); err != nil {
		return fmt.Errorf("await snapshot: %w", err)
	}
	start := time.Now()
	for {
		if have, ok := scrapeMetric(c.metrics, "clawguard_guard_snapshot_revision"); ok && int64(have) >= want {
			fmt.Printf("the server's fact snapshot applied the fixture (revision %d) in %s\n", want, time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("await snapshot: the server's copy is not at revision %d after 30s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// codeCounts counts errors by gRPC code (a shed decision is ResourceExhausted).
type codeCounts struct {
	mu sync.Mutex
	n  map[codes.Code]int
}

func (c *codeCounts) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[codes.Code]int{}
	}
	c.n[status.Code(err)]++
}

func (c *codeCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for code, n := range c.n {
		parts = append(parts, fmt.Sprintf("%s=%d", code, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// reaskWaits spaces the re-asks of one shed decision as the runner's
// decide client does (runner/internal/decide): the server's hint, doubled
// for each refusal in a row up to max(2s, hint), jittered by ±25 %.
type reaskWaits struct{ refusals int }

func (w *reaskWaits) next(hint time.Duration) time.Duration {
	d := hint << min(w.refusals, 16)
	d = min(d, max(2*time.Second, hint))
	w.refusals++
	return time.Duration(float64(d) * (0.75 + 0.5*mrand.Float64()))
}
