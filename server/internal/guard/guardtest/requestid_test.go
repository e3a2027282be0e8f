package guardtest

import (
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A request id is one decision: retries get its answer, and a replay or a
// hold whose id was taken leaves nothing behind.

func TestRequestIDIsIdempotent(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	withOwner(w)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	req := agentCreate(w, &guardv1.HoldCard{Title: "x"})
	req.RequestId = "retry-1"
	first, err := runner.Guard.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := runner.Guard.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(first, again) || first.GetHoldId() == "" {
		t.Fatalf("retry answered differently:\n%v\n%v", first, again)
	}
	if n := w.count(`SELECT count(*) FROM holds`); n != 1 {
		t.Fatalf("%d holds, want 1", n)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'retry-1'`); n != 1 {
		t.Fatalf("%d decisions, want 1", n)
	}
	// The same request id with a grant: the retry of an allowed replay is
	// the same allow (same citation), not a second consume.
	w.exec(approvedHold("{A}-i1", "create_agent", "approved", `{"name":"Scout"}`, false))
	rep := agentCreate(w, nil)
	rep.Grant, rep.RequestId = w.sub("{A}-i1"), "retry-2"
	a, err := runner.Guard.Decide(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	b, err := runner.Guard.Decide(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	if a.GetDecision().GetEffect() != allow || a.GetDecisionId() != b.GetDecisionId() {
		t.Fatalf("replay retry: %v / %v", a, b)
	}
}

// The consume and the replay's log row are one statement: a replay whose
// request id another decision claimed after it read its facts is not
// logged, and its grant stays unused for a later replay. (A claim with no
// stored answer stands in for that race: the facts read finds no prior
// answer, the claim then conflicts.)
func TestReplayWhoseRequestIDIsTakenLeavesTheGrantUnused(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	w.exec(approvedHold("{A}-taken", "create_agent", "approved", `{"name":"Scout"}`, false))
	w.exec(`INSERT INTO decision_requests (runner_id, request_id, decision_id, at) VALUES ('{R}', 'taken-1', 'dec_other', now())`)
	rep := agentCreate(w, nil)
	rep.Grant, rep.RequestId = w.sub("{A}-taken"), "taken-1"
	if resp, err := runner.Guard.Decide(ctx, rep); err == nil && resp.GetDecision().GetEffect() == allow {
		t.Fatalf("a replay whose request id was taken was allowed: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '{A}-taken' AND consumed_at IS NULL AND consumed_by IS NULL`); n != 1 {
		t.Fatal("the grant was consumed by a replay that was not logged")
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE grant_id = '{A}-taken'`); n != 0 {
		t.Fatalf("%d decisions logged for the refused replay", n)
	}
	// The grant still serves the replay under a fresh request id.
	rep.RequestId = "taken-2"
	if resp, err := runner.Guard.Decide(ctx, rep); err != nil || resp.GetDecision().GetEffect() != allow {
		t.Fatalf("the replay again: %v %v, want ALLOW", resp, err)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '{A}-taken' AND consumed_by IS NOT NULL`); n != 1 {
		t.Fatal("the second replay did not consume the grant")
	}
}

// A held decision's log row goes out with the hold's requested event, in
// one round trip: when its request id was claimed meanwhile (a claim with
// no stored answer stands in for that race, as above), the row's conflict
// still fails the transaction, so neither the hold nor its event is left.
func TestHoldWhoseRequestIDIsTakenLeavesNoHold(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	withOwner(w)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	w.exec(`INSERT INTO decision_requests (runner_id, request_id, decision_id, at) VALUES ('{R}', 'taken-h', 'dec_other', now())`)
	req := agentCreate(w, &guardv1.HoldCard{Title: "x"})
	req.RequestId = "taken-h"
	if resp, err := runner.Guard.Decide(ctx, req); err == nil && resp.GetHoldCreated() {
		t.Fatalf("a held decision whose request id was taken created a hold: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE session_id = '{SA}'`); n != 0 {
		t.Fatalf("%d holds left by a held decision that was not logged", n)
	}
	if n := w.count(`SELECT count(*) FROM hold_events e JOIN holds h ON h.id = e.hold_id WHERE h.session_id = '{SA}'`); n != 0 {
		t.Fatalf("%d hold events left by a held decision that was not logged", n)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'taken-h'`); n != 0 {
		t.Fatalf("%d decisions logged under the taken request id", n)
	}
	// Under a fresh request id the same decision holds, logged with its hold.
	req.RequestId = "fresh-h"
	resp, err := runner.Guard.Decide(ctx, req)
	if err != nil || !resp.GetHoldCreated() {
		t.Fatalf("the decision again: %v %v, want a created hold", resp, err)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'fresh-h' AND hold_id = '` + resp.GetHoldId() + `'`); n != 1 {
		t.Fatal("the held decision's log row does not name its hold")
	}
	if n := w.count(`SELECT count(*) FROM hold_events WHERE hold_id = '` + resp.GetHoldId() + `' AND type = 'requested'`); n != 1 {
		t.Fatal("the created hold has no requested event")
	}
}

// Concurrent retries of one request id race past the facts read; the log's
// unique key settles them and every caller gets the winner's answer.
func TestConcurrentRetriesOfOneRequestIDAgree(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	w.exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`)
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), ""))
	const n = 12
	ids := make(chan string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := runner.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Actor: w.actor("agent:{A}:{SA}"),
				Resource: map[string]string{"to": w.B}, RequestId: "same"})
			if err != nil || resp.GetDecision().GetEffect() != allow {
				t.Errorf("%v %v", resp, err)
				return
			}
			ids <- resp.GetDecisionId()
		}()
	}
	close(start)
	wg.Wait()
	close(ids)
	first := ""
	for id := range ids {
		if first == "" {
			first = id
		}
		if id != first {
			t.Fatalf("retries answered with different decisions: %s and %s", first, id)
		}
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE request_id = 'same' AND runner_id = '{R}'`); n != 1 {
		t.Fatalf("%d decisions logged for one request id", n)
	}
}
