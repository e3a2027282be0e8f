package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// pushWait is how long a round trip waits for its replay push after
// Resolve returned before it counts as failed.
const pushWait = 10 * time.Second

// approvals is the approval round-trip load (-approvals R), the protocol of
// server/internal/approvals/roundtrip_bench_test.go: the runner's
// decision of the agent's self_mod.install_packages HOLDs → the owner's
// Approvals.Resolve approves → the replay push arrives on the runner's
// Connect stream (acked) → the runner's decision with grant = hold id is
// ALLOW, both over the runner's DecideStream (streamDecider). It has a runner of its own, registered with the delivery actions
// the held action needs (a registered runner holds its lease only while it
// heartbeats, and registration re-places its sessions; the decision load's
// runner is left as setup made it), one agent group with a session on it,
// and an owner user with a user token.
type approvals struct {
	dbURL                 string
	runner, instance      string
	group, session        string
	runnerConn, ownerConn *grpc.ClientConn
	guard                 *streamDecider // the runner's DecideStream
	owner                 guardv1.ApprovalsClient
	agent                 *guardv1.Actor

	stream       guardv1.Registry_ConnectClient
	cancelStream context.CancelFunc
	sendMu       sync.Mutex // acks and heartbeats share the stream
	streamDone   chan struct{}
	streamErr    error // set before streamDone closes
	hbStop       chan struct{}

	mu      sync.Mutex
	waiting map[string]chan arrival // hold id → its round trip
	stray   atomic.Int64            // replay pushes no round trip waited for
}

// arrival is a replay push and when it came off the stream.
type arrival struct {
	push *guardv1.Push
	at   time.Time
}

func setupApprovals(ctx context.Context, c config) (*approvals, error) {
	tag := randHex(4)
	a := &approvals{dbURL: c.dbURL, runner: "bench-appr-" + tag, instance: "decideload-" + randHex(4), group: "bench-appr-" + tag + "-g",
		waiting: map[string]chan arrival{}, streamDone: make(chan struct{}), hbStop: make(chan struct{})}
	group, owner := a.group, "bench:owner-"+tag
	runnerSecret, ownerSecret := newSecret(), newSecret()
	rh, oh := sha256.Sum256([]byte(runnerSecret)), sha256.Sum256([]byte(ownerSecret))
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return nil, fmt.Errorf("approvals fixture: connect: %w", err)
	}
	defer conn.Close(ctx)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO agent_groups (id, name) VALUES ($1, $1)`, []any{group}},
			{`INSERT INTO users (id) VALUES ($1)`, []any{owner}},
			{`INSERT INTO user_roles (user_id, role) VALUES ($1, 'owner')`, []any{owner}},
			{`INSERT INTO tokens (id, kind, name, hash, runner_id) VALUES ($1, 'runner', 'decideload approvals', $2, $3)`,
				[]any{"tok_" + a.runner, rh[:], a.runner}},
			{`INSERT INTO tokens (id, kind, name, hash, user_id) VALUES ($1, 'user', 'decideload approvals owner', $2, $3)`,
				[]any{"tok_owner_" + tag, oh[:], owner}},
		} {
			if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
				return fmt.Errorf("%s: %w", q.sql, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("approvals fixture: %w", err)
	}
	if a.runnerConn, err = dial(c, runnerSecret); err != nil {
		return nil, err
	}
	if a.ownerConn, err = dial(c, ownerSecret); err != nil {
		a.runnerConn.Close()
		return nil, err
	}
	a.owner = guardv1.NewApprovalsClient(a.ownerConn)
	if err := a.connect(ctx, group); err != nil {
		a.runnerConn.Close()
		a.ownerConn.Close()
		return nil, fmt.Errorf("approvals fixture: %w", err)
	}
	if a.guard, err = newStreamDecider(ctx, a.runnerConn); err != nil {
		a.close()
		return nil, fmt.Errorf("approvals fixture: %w", err)
	}
	return a, nil
}

func newSecret() string {
	return "cgt_" + base64.RawURLEncoding.EncodeToString([]byte(randHex(24)))
}

// connect registers the runner, opens the group's session on it and starts
// its Connect stream: acks every push, routes replays to their round trip,
// heartbeats to keep the lease.
func (a *approvals) connect(ctx context.Context, group string) error {
	registry := guardv1.NewRegistryClient(a.runnerConn)
	reg, err := registry.RegisterRunner(ctx, &guardv1.RegisterRunnerRequest{RunnerId: a.runner, InstanceId: a.instance, Version: "decideload",
		Capabilities: []string{"process"}, DeliveryActions: []*guardv1.DeliveryActionDecl{
			{Name: "install_packages", CatalogAction: "self_mod.install_packages"}, {Name: "cli_request"}}})
	if err != nil {
		return fmt.Errorf("register runner %s: %w", a.runner, err)
	}
	sess, err := registry.OpenSession(ctx, &guardv1.OpenSessionRequest{AgentGroupId: group})
	if err != nil {
		return fmt.Errorf("open session of %s: %w", group, err)
	}
	a.session = sess.GetSession().GetId()
	a.agent = &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: group, SessionId: a.session}}}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancelStream = cancel
	if a.stream, err = registry.Connect(sctx); err != nil {
		cancel()
		return fmt.Errorf("connect: %w", err)
	}
	if err := a.send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Hello{Hello: &guardv1.ConnectHello{RunnerId: a.runner, InstanceId: a.instance}}}); err != nil {
		cancel()
		return fmt.Errorf("connect hello: %w", err)
	}
	go a.receive()
	every := reg.GetHeartbeatInterval().AsDuration()
	if every <= 0 {
		every = 5 * time.Second
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-a.hbStop:
				return
			case <-a.streamDone:
				return
			case <-t.C:
				_ = a.send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Heartbeat{Heartbeat: &guardv1.Heartbeat{}}})
			}
		}
	}()
	return nil
}

func (a *approvals) send(m *guardv1.ConnectRequest) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	return a.stream.Send(m)
}

// receive acks every push and hands each replay to the round trip waiting
// for its hold. When the stream ends, every waiting round trip fails at once.
func (a *approvals) receive() {
	defer close(a.streamDone)
	for {
		m, err := a.stream.Recv()
		if err != nil {
			a.streamErr = err
			return
		}
		p := m.GetPush()
		if p == nil {
			continue // lease renewals
		}
		at := time.Now()
		if err := a.send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Ack{Ack: &guardv1.PushAck{PushId: p.GetId(), Ok: true}}}); err != nil {
			a.streamErr = fmt.Errorf("ack push %s: %w", p.GetId(), err)
			return
		}
		if p.GetReplay() == nil {
			continue
		}
		a.mu.Lock()
		ch := a.waiting[p.GetReplay().GetHoldId()]
		delete(a.waiting, p.GetReplay().GetHoldId())
		a.mu.Unlock()
		if ch == nil {
			a.stray.Add(1) // a redelivery, or its round trip gave up
			continue
		}
		ch <- arrival{push: p, at: at} // buffered: never blocks
	}
}

// close retires the fixture, then gives the lease up and ends the stream.
func (a *approvals) close() {
	if err := a.retire(); err != nil {
		fmt.Fprintln(os.Stderr, "decideload: approvals cleanup:", err)
	}
	close(a.hbStop)
	_ = a.send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Release{Release: &guardv1.LeaseRelease{}}})
	a.sendMu.Lock()
	_ = a.stream.CloseSend()
	a.sendMu.Unlock()
	select {
	case <-a.streamDone:
	case <-time.After(2 * time.Second):
	}
	a.cancelStream()
	if a.guard != nil {
		a.guard.close()
	}
	a.runnerConn.Close()
	a.ownerConn.Close()
}

// retire stops what the load leaves behind. Like the runner it stands in
// for, it replays but never applies (ApplyAction would add every package to
// the group's config), so the server's reconciler would re-send each
// approved replay after its grace (30 s by default) up to 5 times, and the
// session, once the lease is released, would move to another live runner
// (e.g. a decision load's) with those replays. Before the release: the
// approved, unapplied holds are given up with a reason and the session is
// stopped.
func (a *approvals) retire() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, a.dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE holds SET unapplied_at = now(), unapplied_reason = 'decideload: a load generator replays but does not apply'
			WHERE agent_group_id = $1 AND status = 'approved' AND applied_at IS NULL AND unapplied_at IS NULL`, a.group); err != nil {
			return fmt.Errorf("give up approved holds: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET status = 'stopped' WHERE id = $1`, a.session); err != nil {
			return fmt.Errorf("stop session %s: %w", a.session, err)
		}
		return nil
	})
}

// trip is one round trip's timings.
type trip struct {
	whole      time.Duration // scheduled start → replay ALLOW
	afterClick time.Duration // Resolve sent → replay ALLOW
	resolve    time.Duration // Resolve alone
	push       time.Duration // Resolve returned → push arrived (0 if it came first)
	replay     time.Duration // the replay Decide
}

// roundTrip runs round trip i; a failure is named by its step and kind.
func (a *approvals) roundTrip(ctx context.Context, i int, sched time.Time) (trip, string) {
	payload, err := structpb.NewStruct(map[string]any{"apt": []any{fmt.Sprintf("pkg%d", i)}})
	if err != nil {
		return trip{}, "payload: " + err.Error()
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	d, err := a.guard.Decide(cctx, &guardv1.DecideRequest{Action: "self_mod.install_packages", Actor: a.agent, Payload: payload,
		Card: &guardv1.HoldCard{Title: "install", DeliveryAction: "install_packages"}})
	cancel()
	switch {
	case err != nil:
		return trip{}, "hold Decide: " + status.Code(err).String()
	case d.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD:
		return trip{}, "hold Decide: answered " + d.GetDecision().GetEffect().String()
	case d.GetHoldId() == "":
		return trip{}, "hold Decide: HOLD without a hold id"
	}
	hold := d.GetHoldId()
	// Waiting before Resolve: the push may arrive before Resolve's answer.
	ch := make(chan arrival, 1)
	a.mu.Lock()
	a.waiting[hold] = ch
	a.mu.Unlock()
	forget := func() {
		a.mu.Lock()
		delete(a.waiting, hold)
		a.mu.Unlock()
	}
	t1 := time.Now()
	cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	_, err = a.owner.Resolve(cctx, &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE})
	cancel()
	if err != nil {
		forget()
		return trip{}, "Resolve: " + status.Code(err).String()
	}
	t2 := time.Now()
	var got arrival
	timer := time.NewTimer(pushWait)
	defer timer.Stop()
	select {
	case got = <-ch:
	case <-timer.C:
		forget()
		return trip{}, "push: none within 10s"
	case <-a.streamDone:
		forget()
		return trip{}, "push: Connect stream ended"
	}
	t3 := got.at
	if t3.Before(t2) { // the push beat Resolve's answer: it waited 0
		t3 = t2
	}
	r := got.push.GetReplay()
	agent := a.agent
	if got.push.GetSessionId() != agent.GetAgent().GetSessionId() {
		return trip{}, "push: for another session"
	}
	cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	ok, err := a.guard.Decide(cctx, &guardv1.DecideRequest{Action: r.GetCatalogAction(), Actor: agent, Payload: r.GetPayload(),
		Resource: r.GetResource(), Grant: r.GetHoldId()})
	cancel()
	switch {
	case err != nil:
		return trip{}, "replay Decide: " + status.Code(err).String()
	case ok.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW:
		return trip{}, "replay Decide: answered " + ok.GetDecision().GetEffect().String()
	}
	now := time.Now()
	return trip{whole: now.Sub(sched), afterClick: now.Sub(t1), resolve: t2.Sub(t1), push: t3.Sub(t2), replay: now.Sub(t3)}, ""
}

// approvalResult is the approval load's measured period.
type approvalResult struct {
	rate, achieved                           float64
	whole, afterClick, resolve, push, replay []time.Duration
	errors, warmErrors, stray, notRun        int64
	failures                                 *kindCounts
	streamErr                                error
}

// run is the open-loop generator: round trips at rate per second for
// warmup + duration (latency of the whole loop from each one's scheduled
// time), measuring those scheduled after the warm-up. A cancelled ctx stops
// issuing new round trips (counted as not run).
func (a *approvals) run(ctx context.Context, rate float64, warmup, duration time.Duration) *approvalResult {
	total := int((warmup + duration).Seconds() * rate)
	warm := int(warmup.Seconds() * rate)
	trips := make([]trip, total)
	done := make([]bool, total)
	r := &approvalResult{rate: rate, failures: &kindCounts{}}
	var errs, warmErrs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now().Add(50 * time.Millisecond)
	interval := time.Duration(float64(time.Second) / rate)
	pace(start, interval, total, func(i int, sched time.Time) bool {
		if ctx.Err() != nil {
			r.notRun = int64(total - i)
			return false
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, fail := a.roundTrip(context.WithoutCancel(ctx), i, sched)
			if fail != "" {
				if i < warm {
					warmErrs.Add(1)
					r.failures.add("warm-up " + fail)
					return
				}
				errs.Add(1)
				r.failures.add(fail)
				return
			}
			trips[i], done[i] = t, true
		}()
		return true
	})
	wg.Wait()
	elapsed := time.Since(start.Add(warmup))
	ok := 0
	for i := warm; i < total; i++ {
		if !done[i] {
			continue
		}
		t := trips[i]
		r.whole, r.afterClick, r.resolve = append(r.whole, t.whole), append(r.afterClick, t.afterClick), append(r.resolve, t.resolve)
		r.push, r.replay = append(r.push, t.push), append(r.replay, t.replay)
		ok++
	}
	for _, d := range [][]time.Duration{r.whole, r.afterClick, r.resolve, r.push, r.replay} {
		sortDurations(d)
	}
	r.achieved = float64(ok) / elapsed.Seconds()
	r.errors, r.warmErrors, r.stray = errs.Load(), warmErrs.Load(), a.stray.Load()
	select {
	case <-a.streamDone:
		r.streamErr = a.streamErr
		if r.streamErr == nil {
			r.streamErr = errors.New("ended")
		}
	default:
	}
	return r
}

// print is the approvals block after the decision results (nothing when off).
func (r *approvalResult) print() {
	if r == nil {
		return
	}
	fmt.Printf("approvals rate %4.0f/s  achieved %8.1f/s  n=%d  errors %d (warm-up %d)  stray replay pushes %d\n",
		r.rate, r.achieved, len(r.whole), r.errors, r.warmErrors, r.stray)
	if f := r.failures.String(); f != "" {
		fmt.Printf("       failures: %s\n", f)
	}
	if r.notRun > 0 {
		fmt.Printf("       %d round trips not run (the decision load stopped early)\n", r.notRun)
	}
	if r.streamErr != nil {
		fmt.Printf("       Connect stream: %v\n", r.streamErr)
	}
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{
		{"approve → allowed", r.afterClick},
		{"whole loop", r.whole},
		{"Resolve", r.resolve},
		{"push after Resolve", r.push},
		{"replay Decide", r.replay},
	} {
		fmt.Printf("       %-19s p50 %-9s p95 %-9s p99 %-9s p99.9 %-9s max %s\n", row.name+":",
			pct(row.d, 0.50).Round(time.Microsecond), pct(row.d, 0.95).Round(time.Microsecond),
			pct(row.d, 0.99).Round(time.Microsecond), pct(row.d, 0.999).Round(time.Microsecond), pct(row.d, 1).Round(time.Microsecond))
	}
	fmt.Println("       (each round trip adds two decisions and a Resolve to the server's work: any CPU and WAL per decision above include them)")
}

// alongside runs the decision load with the approval load (when a is set)
// in parallel over the same warm-up and measured period.
func alongside(ctx context.Context, c config, a *approvals, decide func() (*result, error)) (*result, *approvalResult, error) {
	if a == nil {
		r, err := decide()
		return r, nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan *approvalResult, 1)
	go func() { out <- a.run(actx, c.approvals, c.warmup, c.duration) }()
	r, err := decide()
	if err != nil {
		cancel()
	}
	return r, <-out, err
}

// kindCounts counts failures by kind.
type kindCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (k *kindCounts) add(kind string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n == nil {
		k.n = map[string]int{}
	}
	k.n[kind]++
}

func (k *kindCounts) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var parts []string
	for kind, n := range k.n {
		parts = append(parts, fmt.Sprintf("%s=%d", kind, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
