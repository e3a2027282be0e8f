package guardtest

import (
	"fmt"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/snapshot"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// BenchmarkEngineDecide measures one a2a.send ALLOW through the engine
// (facts read + batched log write, no gRPC): ns/op is the serial latency,
// B/op and allocs/op the heap one decision costs in flight.
//
//	go test -run '^$' -bench EngineDecide -benchmem ./internal/guard/guardtest/
func BenchmarkEngineDecide(b *testing.B) {
	srv := testserver.Start(b)
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO agent_groups (id, name) VALUES ('ba', 'ba'), ('bb', 'bb');
		INSERT INTO sessions (id, agent_group_id) VALUES ('bsa', 'ba');
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('ba', 'b', 'bb')`); err != nil {
		b.Fatal(err)
	}
	cat, err := app.BuildCatalog()
	if err != nil {
		b.Fatal(err)
	}
	req := func() *guard.Request {
		return &guard.Request{Input: guard.Input{Action: "a2a.send", Resource: map[string]string{"to": "bb"},
			Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ba", SessionId: "bsa"}}}}}
	}
	snap := snapshot.New(srv.Pool, cat.Tables(), snapshot.Options{})
	if err := snap.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	for _, o := range []guard.Options{
		{DirectReads: true, Batchers: 2},
		{Batchers: 1},
		{Batchers: 2},
		{Batchers: 1, Yield: true},
		{Batchers: 2, Yield: true},
		{Batchers: 2, Yield: true, Snapshot: snap},
	} {
		eng := guard.NewEngine(cat, srv.Pool, o)
		defer eng.Close()
		b.Run(fmt.Sprintf("direct=%v,batchers=%d,yield=%v,snapshot=%v", o.DirectReads, o.Batchers, o.Yield, o.Snapshot != nil),
			func(b *testing.B) { benchEngine(b, eng, req) })
	}
}

func benchEngine(b *testing.B, eng *guard.Engine, req func() *guard.Request) {
	b0, r0, w0 := eng.BatchStats()
	defer func() {
		b1, r1, w1 := eng.BatchStats()
		b.Logf("batcher: %d batches carried %d reads and %d log rows", b1-b0, r1-r0, w1-w0)
	}()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := eng.Decide(ctx, req())
			if err != nil || resp.GetDecision().GetEffect() != allow {
				b.Fatal(err, resp)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := eng.Decide(ctx, req()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkGRPCDecide is Guard.Decide through the real server (interceptor
// chain, auth, the engine), as a runner for its agent.
func BenchmarkGRPCDecide(b *testing.B) {
	srv := testserver.Start(b)
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO agent_groups (id, name) VALUES ('ba', 'ba'), ('bb', 'bb');
		INSERT INTO runners (id) VALUES ('br');
		INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('bsa', 'ba', 'br');
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('ba', 'b', 'bb')`); err != nil {
		b.Fatal(err)
	}
	c := testserver.ClientsFor(srv.Conn(b, srv.Token(b, "runner", "br", ""), ""))
	req := &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": "bb"},
		Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ba", SessionId: "bsa"}}}}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Guard.Decide(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
