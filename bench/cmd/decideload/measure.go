package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

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
