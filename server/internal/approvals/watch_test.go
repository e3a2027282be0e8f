package approvals_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/listener"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Lifecycle events as subscribers see them: Watch on every replica, the
// observers, expiry and sweep, a lost LISTEN connection.

// watcher collects a Watch stream's events.
type watcher struct {
	mu     sync.Mutex
	events []*guardv1.WatchResponse
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

func watch(t *testing.T, c testserver.Clients, req *guardv1.WatchRequest) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Approvals.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// The header arrives once the server's subscription is live.
	md, err := stream.Header()
	if err != nil {
		t.Fatal(err)
	}
	if v := md.Get(api.WatchCursorHeader); len(v) != 1 || (!req.GetFromNow() && v[0] != strconv.FormatInt(req.GetAfterCursor(), 10)) {
		// No header: the stream ended before it started; its status says why.
		_, recvErr := stream.Recv()
		t.Fatalf("watch header %s = %v (stream: %v)", api.WatchCursorHeader, v, recvErr)
	}
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			ev, err := stream.Recv()
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			w.events = append(w.events, ev)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// now is the current end of the event table: a Watch after it is "from
// now" without racing the server's subscription against the test's writes.
func now(t *testing.T, srv *testserver.Server) int64 {
	t.Helper()
	c, err := approvals.LatestCursor(context.Background(), srv.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (w *watcher) stop() { w.cancel(); <-w.done }

// waitFor polls until at least n events arrived (deadline 10 s).
func (w *watcher) waitFor(t *testing.T, n int) []*guardv1.WatchResponse {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		got := append([]*guardv1.WatchResponse(nil), w.events...)
		err := w.err
		w.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("waited for %d events, have %d (stream error %v)", n, len(got), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestApprovalLifecycleObservers ports approval-resolved.test.ts: the
// requested event carries the row (anchor group, rule) and its delivered
// approver; the resolved event carries the hold, outcome and resolver.
func TestApprovalLifecycleObservers(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	exec(t, srv.Pool, `INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, 'slack', 'dm-admin')`, scopedAdmin)
	// Two observers: the operator's Watch and the admin's own Watch.
	w1 := watch(t, srv.Operator(t), &guardv1.WatchRequest{FromNow: true})
	w2 := watch(t, userClients(t, srv, scopedAdmin), &guardv1.WatchRequest{AfterCursor: now(t, srv)})
	payload, _ := structpb.NewStruct(map[string]any{"thing": 1})
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_requested_action", SessionID: "sess-1", Payload: payload,
		Title: "Test hold", Question: "Approve the thing?"})
	if _, err := userClients(t, srv, scopedAdmin).Approvals.Resolve(context.Background(),
		&guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*watcher{w1, w2} {
		evs := w.waitFor(t, 2)
		req, res := evs[0], evs[1]
		if req.GetType() != guardv1.EventType_EVENT_TYPE_REQUESTED || req.GetHold().GetId() != h.GetId() ||
			req.GetHold().GetDeliveredTo() != scopedAdmin || req.GetHold().GetSessionId() != "sess-1" ||
			req.GetHold().GetAgentGroupId() != "ag-1" || req.GetHold().GetApproverRule().GetAdminsOfScope() == nil ||
			req.GetUndelivered() || !proto.Equal(req.GetHold().GetPayload(), payload) {
			t.Fatalf("requested event: %v", req)
		}
		if res.GetType() != guardv1.EventType_EVENT_TYPE_RESOLVED || res.GetOutcome() != guardv1.Outcome_OUTCOME_REJECT ||
			res.GetResolver() != scopedAdmin || res.GetHold().GetId() != h.GetId() || res.GetHold().GetSessionId() != "sess-1" ||
			res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_REJECTED || res.GetCursor() <= req.GetCursor() {
			t.Fatalf("resolved event: %v", res)
		}
	}
	// A user who may not resolve the hold does not see its events.
	w3 := watch(t, userClients(t, srv, otherAdmin), &guardv1.WatchRequest{})
	w4 := watch(t, srv.Operator(t), &guardv1.WatchRequest{}) // replay all, as a marker the reads are done
	w4.waitFor(t, 2)
	w3.stop()
	if len(w3.events) != 0 {
		t.Fatalf("another group's admin saw %d events", len(w3.events))
	}
}

// TestWatchAcrossReplicas: a hold created and resolved on replica A is seen
// on replica B once each, in order; a subscriber that disconnects resumes
// from its cursor and gets exactly what it missed.
func TestWatchAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	seed(t, a)
	b := testserver.StartOn(t, a.URL)
	onB := b.Operator(t)
	w := watch(t, onB, &guardv1.WatchRequest{AfterCursor: now(t, a)})
	h := createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	if _, err := userClients(t, a, owner).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
		t.Fatal(err)
	}
	evs := w.waitFor(t, 2)
	// Give a duplicate a chance to show up, bounded by a marker event.
	marker := createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "marker"})
	evs = w.waitFor(t, 3)
	if len(evs) != 3 || evs[0].GetType() != guardv1.EventType_EVENT_TYPE_REQUESTED || evs[1].GetType() != guardv1.EventType_EVENT_TYPE_RESOLVED ||
		evs[0].GetHold().GetId() != h.GetId() || evs[1].GetHold().GetId() != h.GetId() || evs[2].GetHold().GetId() != marker.GetId() {
		t.Fatalf("replica B saw %v", evs)
	}
	if !(evs[0].GetCursor() < evs[1].GetCursor() && evs[1].GetCursor() < evs[2].GetCursor()) {
		t.Fatalf("out of order: %d %d %d", evs[0].GetCursor(), evs[1].GetCursor(), evs[2].GetCursor())
	}

	// Disconnect, miss two events, resume from the last cursor seen.
	w.stop()
	last := evs[2].GetCursor()
	missed := createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "missed"})
	if _, err := userClients(t, a, owner).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: missed.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT}); err != nil {
		t.Fatal(err)
	}
	w2 := watch(t, onB, &guardv1.WatchRequest{AfterCursor: last})
	got := w2.waitFor(t, 2)
	live := createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "live"})
	got = w2.waitFor(t, 3)
	if len(got) != 3 || got[0].GetHold().GetId() != missed.GetId() || got[0].GetType() != guardv1.EventType_EVENT_TYPE_REQUESTED ||
		got[1].GetHold().GetId() != missed.GetId() || got[1].GetOutcome() != guardv1.Outcome_OUTCOME_REJECT || got[2].GetHold().GetId() != live.GetId() {
		t.Fatalf("resumed stream: %v", got)
	}
}

// TestExpiryAndSweepEmitEvents: a hold past its expiry is resolved expire by
// the background loop (once, with two replicas running it); a swept-on-
// restart hold is resolved sweep when a replica starts.
func TestExpiryAndSweepEmitEvents(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	seed(t, a)
	b := testserver.StartOn(t, a.URL)
	w := watch(t, b.Operator(t), &guardv1.WatchRequest{AfterCursor: now(t, a)})
	h := createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t", ExpiresAt: time.Now().Add(300 * time.Millisecond)})
	evs := w.waitFor(t, 2)
	if evs[1].GetType() != guardv1.EventType_EVENT_TYPE_RESOLVED || evs[1].GetOutcome() != guardv1.Outcome_OUTCOME_EXPIRE ||
		evs[1].GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_EXPIRED || evs[1].GetResolver() != "" {
		t.Fatalf("expiry event: %v", evs[1])
	}
	// Expiry is a deny, and the requester is told so.
	if n := lastPush(t, a, "notify").GetNotify(); n.GetHoldId() != h.GetId() || n.GetKind() != guardv1.NoticeKind_NOTICE_KIND_FAILED ||
		!strings.Contains(n.GetText(), "denied, it will not run") {
		t.Fatalf("expiry notice: %v", n)
	}
	// Resolving an expired hold is refused.
	if _, err := userClients(t, a, owner).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); code(err) != codes.FailedPrecondition {
		t.Fatalf("approve after expiry: %v", err)
	}

	// A credential hold through Request, then a replica (re)starts.
	bridge := testserver.ClientsFor(a.Conn(t, a.BridgeToken(t, "slack"), ""))
	rr, err := bridge.Approvals.Request(context.Background(), &guardv1.RequestRequest{Kind: approvals.KindOneCLICredential, AgentGroupId: "ag-1",
		Card: &guardv1.HoldCard{Title: "Use GitHub token"}, SweptOnRestart: true})
	if err != nil {
		t.Fatal(err)
	}
	durable := createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "durable"})
	testserver.StartOn(t, a.URL)
	evs = w.waitFor(t, 5)
	sw := evs[4]
	if sw.GetHold().GetId() != rr.GetHold().GetId() || sw.GetOutcome() != guardv1.Outcome_OUTCOME_SWEEP || sw.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_SWEPT {
		t.Fatalf("sweep event: %v", sw)
	}
	if st := pendingStatus(t, a, durable.GetId()); st != "pending" {
		t.Fatalf("a durable hold was swept: %s", st)
	}
	if n := count(t, a.Pool, `SELECT count(*) FROM hold_events WHERE type = 'resolved'`); n != 2 {
		t.Fatalf("%d resolved events, want 2 (one expire, one sweep)", n)
	}
}

// TestWatchSurvivesListenerLoss: the replica's LISTEN connection is killed
// by the database; events keep flowing (reconnect, and the table re-read
// catches up on anything committed meanwhile).
func TestWatchSurvivesListenerLoss(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	w := watch(t, srv.Operator(t), &guardv1.WatchRequest{FromNow: true})
	var killed int
	for deadline := time.Now().Add(10 * time.Second); killed == 0; time.Sleep(20 * time.Millisecond) {
		killed = count(t, srv.Pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = '`+listener.AppName+`'`)
		if time.Now().After(deadline) {
			t.Fatal("no LISTEN connection found")
		}
	}
	h := createOn(t, srv, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	if evs := w.waitFor(t, 1); evs[0].GetHold().GetId() != h.GetId() {
		t.Fatalf("after losing the listener: %v", evs)
	}
}
