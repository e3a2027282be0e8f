package approvals_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// BenchmarkWatchFanout100 measures Approvals.Watch fan-out on one replica
// to 100 gRPC subscribers on loopback (one connection each): each op commits one hold (its
// requested event) and waits until all 100 subscribers have received it.
// Reported: latency from commit to the LAST subscriber's receipt (p50, p99)
// and deliveries/s. A burst phase then commits holds back to back from 4
// writers and reports sustained deliveries/s.
//
//	go test -run '^$' -bench WatchFanout100 -benchtime 300x ./internal/approvals/
func BenchmarkWatchFanout100(b *testing.B) {
	const subscribers = 100
	srv := testserver.Start(b)
	if _, err := srv.Pool.Exec(context.Background(), `INSERT INTO users (id) VALUES ('slack:o'); INSERT INTO user_roles (user_id, role) VALUES ('slack:o', 'owner')`); err != nil {
		b.Fatal(err)
	}
	svc := srv.Deps().Approvals
	start, err := approvals.LatestCursor(context.Background(), srv.Pool)
	if err != nil {
		b.Fatal(err)
	}
	// counts: per hold, how many subscribers have its event; the last one
	// closes the op's channel.
	var (
		mu      sync.Mutex
		waiting = map[string]chan struct{}{}
		counts  = map[string]int{}
		total   atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ready sync.WaitGroup
	for range subscribers {
		ready.Add(1)
		// One connection per subscriber, like 100 separate bridges.
		conn := srv.Conn(b, srv.OperatorToken, "")
		go func() {
			stream, err := testserver.ClientsFor(conn).Approvals.Watch(ctx, &guardv1.WatchRequest{AfterCursor: start})
			if err == nil {
				_, err = stream.Header() // subscribed
			}
			ready.Done()
			if err != nil {
				return
			}
			for {
				ev, err := stream.Recv()
				if err != nil {
					return
				}
				total.Add(1)
				id := ev.GetHold().GetId()
				mu.Lock()
				counts[id]++
				if counts[id] == subscribers {
					if ch := waiting[id]; ch != nil {
						close(ch)
					}
				}
				mu.Unlock()
			}
		}()
	}
	ready.Wait()

	create := func() (string, error) {
		var id string
		err := pgx.BeginFunc(ctx, srv.Pool, func(tx pgx.Tx) error {
			res, err := svc.CreateHoldTx(ctx, tx, approvals.CreateRequest{Kind: "create_agent", Title: "bench"})
			id = res.Hold.GetId()
			return err
		})
		return id, err
	}
	// Warm up: every stream connected and delivering.
	id, err := create()
	if err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := counts[id]
		mu.Unlock()
		if n == subscribers {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("warm-up: %d of %d subscribers got the first event", n, subscribers)
		}
	}

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	began := time.Now()
	before := total.Load()
	for range b.N {
		// The id is known only at commit; the receiver may already have
		// counted it, so check before waiting.
		t0 := time.Now()
		id, err := create()
		if err != nil {
			b.Fatal(err)
		}
		ch := make(chan struct{})
		mu.Lock()
		if counts[id] == subscribers {
			close(ch)
		} else {
			waiting[id] = ch
		}
		mu.Unlock()
		<-ch
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(began)
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(total.Load()-before)/elapsed.Seconds(), "deliveries/s")

	// Burst: 4 writers, 500 holds, until every subscriber has all of them.
	const burst = 500
	before = total.Load()
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range burst / 4 {
				if _, err := create(); err != nil {
					b.Error(w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := before + burst*subscribers
	deadline := time.Now().Add(60 * time.Second)
	for total.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := total.Load(); got < want {
		b.Fatalf("burst: %d of %d deliveries", got-before, want-before)
	}
	b.ReportMetric(float64(burst*subscribers)/time.Since(t0).Seconds(), "burst-deliveries/s")
	fmt.Fprintf(benchOut{b}, "burst of %d holds to %d subscribers delivered in %v\n", burst, subscribers, time.Since(t0).Round(time.Millisecond))
}

type benchOut struct{ b *testing.B }

func (o benchOut) Write(p []byte) (int, error) { o.b.Log(string(p)); return len(p), nil }
