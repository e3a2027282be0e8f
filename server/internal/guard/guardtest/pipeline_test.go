package guardtest

import (
	"io"
	"log/slog"
	"sync"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A statement that fails aborts the rest of its pipelined batch; the
// others in it are retried on their own, so only the bad decision fails
// closed and its neighbours are still answered on their merits.
func TestOneFailingStatementDoesNotFailItsBatch(t *testing.T) {
	srv := testserver.Start(t)
	cat := guard.NewCatalog()
	cat.MustRegister(
		guard.Entry{Action: "t.good", Facts: []guard.Fact{{Name: "one", SQL: `SELECT 1`}},
			Baseline: func(_ *guard.Input, f guard.Facts) (guard.Decision, error) {
				if f.Str("one") != "1" {
					return guard.Deny("fact missing"), nil
				}
				return guard.Allow("ok"), nil
			}},
		guard.Entry{Action: "t.bad", Args: func(in *guard.Input) []any { return []any{in.Arg("n")} },
			Facts:    []guard.Fact{{Name: "n", SQL: `SELECT $6::text::int`}}, // "x" is not an int: the statement fails
			Baseline: func(*guard.Input, guard.Facts) (guard.Decision, error) { return guard.Allow("never"), nil }},
	)
	eng := guard.NewEngine(cat, srv.Pool, guard.Options{Pipelines: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer eng.Close()
	host := &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	for round := range 5 {
		var wg sync.WaitGroup
		results := make([]*guardv1.DecideResponse, 40)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := guard.Input{Action: "t.good", Actor: host}
				if i == 20 {
					in = guard.Input{Action: "t.bad", Actor: host, Payload: map[string]any{"n": "x"}}
				}
				resp, err := eng.Decide(ctx, &guard.Request{Input: in})
				if err != nil {
					t.Error(err)
					return
				}
				results[i] = resp
			}()
		}
		wg.Wait()
		for i, r := range results {
			want := allow
			if i == 20 {
				want = deny
			}
			if r.GetDecision().GetEffect() != want {
				t.Fatalf("round %d, decision %d: %v, want %v", round, i, r.GetDecision(), want)
			}
		}
	}
	if batches, reads, _ := eng.PipelineStats(); batches >= reads {
		t.Logf("no batching happened (%d batches, %d reads): the test proved little", batches, reads)
	}
}
