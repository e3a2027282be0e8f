package guardtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// TestDryRunsAndReadsAreNotEnforcedDecisions: what-if queries (ncl explain)
// and reads are counted in clawguard_guard_queries_total, never in
// clawguard_guard_decisions_total, so a burst of explains that answer deny
// cannot move the deny rate that ClawguardDenySpike watches.
func TestDryRunsAndReadsAreNotEnforcedDecisions(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := a2aWorld(t, srv)
	m := srv.Deps().Metrics
	decisions := func(action, effect string) float64 {
		return testutil.ToFloat64(m.DecisionsTotal.WithLabelValues(action, effect))
	}
	queries := func(action, effect, kind string) float64 {
		return testutil.ToFloat64(m.QueriesTotal.WithLabelValues(action, effect, kind))
	}

	// B → A has no destination: denied. Ten what-if questions, one real send.
	deniedSend := &guardv1.DecideRequest{Action: "a2a.send", Actor: w.actor("agent:{B}:{SB}"),
		Resource: w.resource(map[string]string{"to": "{A}"}), Payload: w.payload(map[string]any{"to": "{A}", "text": "hi"}), DryRun: true}
	for range 10 {
		resp, err := op.Guard.Decide(ctx, deniedSend)
		if err != nil || resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY {
			t.Fatalf("dry run: %v %v", resp, err)
		}
	}
	if got := queries("a2a.send", "deny", "dry_run"); got != 10 {
		t.Fatalf("queries{dry_run, deny} = %v, want 10", got)
	}
	if got := decisions("a2a.send", "deny"); got != 0 {
		t.Fatalf("dry runs counted as %v enforced denials", got)
	}
	deniedSend.DryRun = false
	if _, err := op.Guard.Decide(ctx, deniedSend); err != nil {
		t.Fatal(err)
	}
	if got := decisions("a2a.send", "deny"); got != 1 {
		t.Fatalf("decisions{deny} = %v after one enforced denial, want 1", got)
	}

	// A read through the admin-RPC guard is a query, not a decision.
	before := decisions("groups.list", "allow")
	if _, err := op.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := queries("groups.list", "allow", "read"); got < 1 {
		t.Fatalf("queries{groups.list, read} = %v, want ≥ 1", got)
	}
	if got := decisions("groups.list", "allow"); got != before {
		t.Fatalf("a read moved decisions_total from %v to %v", before, got)
	}
}
