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
	eng := guard.NewEngine(cat, srv.Pool, guard.Options{Batchers: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	if batches, reads, _ := eng.BatchStats(); batches >= reads {
		t.Logf("no batching happened (%d batches, %d reads): the test proved little", batches, reads)
	}
}

// The log rows of a batch go out as one multi-row INSERT: one row the
// database cannot store (a NUL byte — the edge refuses those, this is the
// second fence) failed the whole INSERT, and every decision batched with it
// became an unlogged, failed-closed deny. Only the bad row may fail.
func TestOneUnstorableLogRowDoesNotFailItsBatch(t *testing.T) {
	srv := testserver.Start(t)
	cat := guard.NewCatalog()
	cat.MustRegister(guard.Entry{Action: "t.good",
		Baseline: func(*guard.Input, guard.Facts) (guard.Decision, error) { return guard.Allow("ok"), nil }})
	eng := guard.NewEngine(cat, srv.Pool, guard.Options{Batchers: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer eng.Close()
	host := &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	const n = 40
	for round := range 5 {
		var wg sync.WaitGroup
		results := make([]*guardv1.DecideResponse, n)
		errs := make([]error, n)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := guard.Input{Action: "t.good", Actor: host}
				if i == n/2 {
					in.Action = "t.good\x00" // not in the catalog: allowed, but its log row cannot be stored
				}
				results[i], errs[i] = eng.Decide(ctx, &guard.Request{Input: in})
			}()
		}
		wg.Wait()
		for i, r := range results {
			if i == n/2 {
				if errs[i] == nil && r.GetDecision().GetEffect() == allow {
					t.Fatalf("round %d: the unloggable decision was allowed: %v", round, r.GetDecision())
				}
				continue
			}
			if errs[i] != nil || r.GetDecision().GetEffect() != allow {
				t.Fatalf("round %d, decision %d: %v (%v), want allow — a neighbour's bad row failed it", round, i, r.GetDecision(), errs[i])
			}
		}
	}
	var logged int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE action = 't.good' AND effect = 'allow'`).Scan(&logged); err != nil || logged != 5*(n-1) {
		t.Fatalf("logged allows = %d (%v), want %d", logged, err, 5*(n-1))
	}
}
