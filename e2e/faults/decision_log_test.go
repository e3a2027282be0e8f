package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// durable is the cluster setting these tests need: the fault suite's
// clusters commit asynchronously for speed, which would make every commit
// the asynchronous log's. fsync stays off: the faults here are process
// crashes (the WAL a commit wrote is in the kernel), not machine crashes.
var durable = pgtest.Options{Settings: []string{"synchronous_commit=on"}}

// Issue 29 (7): Postgres stopped at once (pg_ctl stop -m immediate, a
// crash) under hundreds of decisions a second: 5 ALLOWs answered before the
// crash were missing from the decision log afterwards — the asynchronous
// log commit, then the default. With the synchronous commit, the default
// now, an ALLOW is answered only once its row is on disk: every one the
// runner was given is in the log after the restart.
func TestPostgresCrashLosesNoAnsweredAllow(t *testing.T) {
	s := newSystemWith(t, systemOptions{pg: durable})
	x := newA2A(t, s, false, true) // no message policy: every send is allowed
	x.startRunners()
	guards := []guardv1.GuardClient{guardv1.NewGuardClient(x.sender.conn()),
		guardv1.NewGuardClient(dial(t, s.addrs[1], x.sender.token))}
	payload, err := structpb.NewStruct(map[string]any{"to": x.B, "text": "got: crash"})
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		allowed  []string
		answered atomic.Int64
		crashed  atomic.Bool
		after    atomic.Int64 // ALLOWs answered after the crash began (none while it is down)
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-clawguard-session", x.sessA)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				resp, err := guards[w%2].Decide(dctx, &guardv1.DecideRequest{Action: "a2a.send",
					Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: x.A, SessionId: x.sessA}}},
					Resource: map[string]string{"from": x.A, "to": x.B}, Payload: payload,
					RequestId: fmt.Sprintf("crash-%d-%d", w, i)})
				cancel()
				if err != nil || resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
					continue
				}
				answered.Add(1)
				if crashed.Load() {
					after.Add(1)
				}
				mu.Lock()
				allowed = append(allowed, resp.GetDecisionId())
				mu.Unlock()
			}
		}()
	}
	waitFor(t, 60*time.Second, "decisions flowing", func() (bool, string) {
		return answered.Load() >= 2000, fmt.Sprintf("%d ALLOWs answered", answered.Load())
	})
	start := time.Now()
	before := answered.Load()
	time.Sleep(2 * time.Second) // load at its steady rate before the crash (a fault's timing, not a wait for a condition)
	rate := float64(answered.Load()-before) / time.Since(start).Seconds()
	crashed.Store(true)
	if err := s.pg.StopMode("immediate"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the outage, with decisions still asked
	close(stop)
	wg.Wait()
	if err := s.pg.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	var logged int
	waitFor(t, 60*time.Second, "the log readable after the restart", func() (bool, string) {
		err := s.admin.QueryRow(ctxT(t), `SELECT count(*) FROM decisions WHERE id = ANY($1)`, allowed).Scan(&logged)
		return err == nil, fmt.Sprint(err)
	})
	lost := len(allowed) - logged
	t.Logf("FIGURES fault=%q answered_allows=%d rate_per_s=%.0f lost=%d answered_after_the_crash_began=%d",
		"postgres stopped immediately under decisions (sync log)", len(allowed), rate, lost, after.Load())
	if lost != 0 {
		t.Fatalf("%d of %d ALLOWs answered are missing from the decision log after the crash", lost, len(allowed))
	}
}
