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
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
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
