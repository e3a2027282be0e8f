package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/metrics"
)

func deliver(id, session, text string) *guardv1.Push {
	return &guardv1.Push{Id: id, SessionId: session, AgentGroupId: "g1",
		Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{MessageId: "m-" + id, FromAgentGroupId: "g0", Text: text}}}
}

// Issue 29, item 10: a runner that could not renew its lease kept its agents
// running while the server gave their sessions to another runner. Fenced, it
// stops every agent, starts none and takes no push; renewed, it releases
// the sessions that moved meanwhile and starts again the ones still its own.
func TestAFencedRunnerRunsNoAgentUntilItsLeaseIsRenewed(t *testing.T) {
	m, _, rt := newManager(t)
	m.cfg.Metrics = metrics.NewMetrics(prometheus.NewRegistry())
	ctx := context.Background()
	if err := m.Apply(ctx, deliver("p1", "s1", "hello")); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, &guardv1.Push{Id: "p2", SessionId: "gone", AgentGroupId: "g1", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		t.Fatal(err)
	}
	if !running(rt, "s1") || !running(rt, "gone") {
		t.Fatal("agents not started")
	}

	if n := m.Fence(ctx, time.Now().Add(2*time.Second)); n != 2 {
		t.Fatalf("fence stopped %d agents, want 2", n)
	}
	if running(rt, "s1") || running(rt, "gone") {
		t.Fatal("an agent still runs behind the fence")
	}
	err := m.Apply(ctx, deliver("p3", "s1", "while fenced"))
	if !connect.IsRetry(err) || !errors.Is(err, ErrFenced) {
		t.Fatalf("push while fenced: %v, want a retry (fenced)", err)
	}
	if err := m.Wake(ctx, m.Get("s1")); !errors.Is(err, ErrFenced) || running(rt, "s1") {
		t.Fatalf("wake while fenced: %v (running %v), want refused", err, running(rt, "s1"))
	}
	if got := testutil.ToFloat64(m.cfg.Metrics.LeaseFenced); got != 1 {
		t.Fatalf("lease_fenced = %v while fenced", got)
	}

	m.Unfence(ctx)
	if !running(rt, "s1") {
		t.Fatal("the agent of a session still placed here was not started again")
	}
	if m.Get("gone") != nil || running(rt, "gone") {
		t.Fatal("a session that moved meanwhile was started again")
	}
	if err := m.Apply(ctx, deliver("p3", "s1", "after")); err != nil {
		t.Fatalf("push after the renewal: %v", err)
	}
	if m.Get("s1").Inbox.Len() != 2 {
		t.Fatalf("%d items for the agent, want both messages", m.Get("s1").Inbox.Len())
	}
	if f, fenced := testutil.ToFloat64(m.cfg.Metrics.LeaseFencesTotal), testutil.ToFloat64(m.cfg.Metrics.LeaseFenced); f != 1 || fenced != 0 {
		t.Fatalf("lease_fences_total = %v, lease_fenced = %v; want 1 and 0", f, fenced)
	}
}

// Issue 29, item 8: an agent that never comes back for its items (stopped,
// wedged, never reading) is restarted once it has made no progress on them
// for the ack deadline; its items are kept for the new one.
func TestAnAgentHoldingItemsUpIsRestartedWithNothingDropped(t *testing.T) {
	m, _, rt := newManager(t)
	m.cfg.Metrics = metrics.NewMetrics(prometheus.NewRegistry())
	m.cfg.AckDeadline = time.Minute
	ctx := context.Background()
	if err := m.Apply(ctx, deliver("p1", "s1", "hello")); err != nil { // the sleeper never reads it
		t.Fatal(err)
	}
	starts := func() int {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return len(rt.specs)
	}
	before := starts()
	if n := m.restartStalled(ctx, time.Now().Add(30*time.Second)); n != 0 {
		t.Fatalf("restarted %d agents before the deadline", n)
	}
	if n := m.restartStalled(ctx, time.Now().Add(2*time.Minute)); n != 1 || starts() != before+1 {
		t.Fatalf("restarted %d agents (%d starts), want the stalled one once", n, starts()-before)
	}
	if !running(rt, "s1") || m.Get("s1").Inbox.Len() != 1 {
		t.Fatalf("after the restart: running %v, %d items; want running with its item", running(rt, "s1"), m.Get("s1").Inbox.Len())
	}
	// The stall clock started over with the restart.
	if n := m.restartStalled(ctx, time.Now().Add(30*time.Second)); n != 0 {
		t.Fatalf("restarted again %d agents right after a restart", n)
	}
	if got := testutil.ToFloat64(m.cfg.Metrics.InboxStalledRestartsTotal); got != 1 {
		t.Fatalf("inbox_stalled_restarts_total = %v, want 1", got)
	}
	// Fenced, nothing is restarted.
	m.Fence(ctx, time.Now().Add(2*time.Second))
	if n := m.restartStalled(ctx, time.Now().Add(time.Hour)); n != 0 || running(rt, "s1") {
		t.Fatalf("restarted %d agents behind the fence", n)
	}
}
