package approvals_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/listener"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// seed sets up the seed's cast on a running server's database, plus a
// runner hosting sess-1 in ag-1.
func seed(t *testing.T, srv *testserver.Server) {
	t.Helper()
	exec(t, srv.Pool, `INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'one'), ('ag-2', 'two')`)
	for _, u := range []string{owner, globalAdmin, scopedAdmin, otherAdmin, deliveree, rando} {
		exec(t, srv.Pool, `INSERT INTO users (id) VALUES ($1)`, u)
	}
	exec(t, srv.Pool, `INSERT INTO user_roles (user_id, role, agent_group_id, granted_at) VALUES
		($1, 'owner', NULL, now() - interval '4 hours'),
		($2, 'admin', NULL, now() - interval '3 hours'),
		($3, 'admin', 'ag-1', now() - interval '2 hours'),
		($4, 'admin', 'ag-2', now() - interval '1 hours')`, owner, globalAdmin, scopedAdmin, otherAdmin)
	exec(t, srv.Pool, `INSERT INTO runners (id) VALUES ('r1'), ('r2')`)
	exec(t, srv.Pool, `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('sess-1', 'ag-1', 'r1')`)
}

func createOn(t *testing.T, srv *testserver.Server, req approvals.CreateRequest) *guardv1.Hold {
	t.Helper()
	res := create(t, srv.Deps().Approvals, srv.Pool, req)
	if !res.Created {
		t.Fatalf("hold not created: %+v", res)
	}
	return res.Hold
}

func userClients(t testing.TB, srv *testserver.Server, user string) testserver.Clients {
	return testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", user), ""))
}

func code(err error) codes.Code { return status.Code(err) }

func pendingStatus(t *testing.T, srv *testserver.Server, id string) string {
	t.Helper()
	var st string
	if err := srv.Pool.QueryRow(context.Background(), `SELECT status FROM holds WHERE id = $1`, id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestD1GlobalBlastHold ports approver-rule.test.ts's end-to-end D1 case:
// a scoped admin's approve of a global-scope hold is refused and the hold
// stays; the owner's approve resolves it and runs the approved handler once.
func TestD1GlobalBlastHold(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	var mu sync.Mutex
	var applied []string
	srv.Deps().Approvals.OnApproved("test_global_blast", func(_ context.Context, h *guardv1.Hold) error {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, h.GetResolver())
		return nil
	})
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_global_blast", SessionID: "sess-1", Scope: global,
		Rule: adminsOf("ag-1", ""), Title: "CLI: roles-grant"})

	_, err := userClients(t, srv, scopedAdmin).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE})
	if code(err) != codes.PermissionDenied {
		t.Fatalf("scoped admin's approve: want PermissionDenied, got %v", err)
	}
	if st := pendingStatus(t, srv, h.GetId()); st != "pending" || len(applied) != 0 {
		t.Fatalf("after the refused click: status %s, applied %v", st, applied)
	}
	// A bridge asserting the scoped admin is refused the same way.
	bridge := testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "slack"), ""))
	_, err = bridge.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: scopedAdmin})
	if code(err) != codes.PermissionDenied {
		t.Fatalf("bridge as scoped admin: want PermissionDenied, got %v", err)
	}

	res, err := userClients(t, srv, owner).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED || res.GetHold().GetResolver() != owner {
		t.Fatalf("owner's approve: %v", res.GetHold())
	}
	mu.Lock()
	got := strings.Join(applied, ",")
	mu.Unlock()
	if got != owner {
		t.Fatalf("approved handler ran for %q, want once for the owner", got)
	}
	// A second resolve is an error and never a second execution.
	_, err = bridge.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: owner})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already resolved") {
		t.Fatalf("second resolve: want FailedPrecondition already resolved, got %v", err)
	}
	if len(applied) != 1 {
		t.Fatalf("handler ran %d times", len(applied))
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type = 'resolved'`, h.GetId()); n != 1 {
		t.Fatalf("%d resolved events", n)
	}
}

func TestResolveValidationAndPushes(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	op := srv.Operator(t)
	ctx := context.Background()
	payload, _ := structpb.NewStruct(map[string]any{"apt": []any{"curl"}})

	// Who clicks: operator without as_user → InvalidArgument; a user naming
	// someone else → PermissionDenied.
	h := createOn(t, srv, approvals.CreateRequest{Kind: "install_packages", SessionID: "sess-1", Title: "install curl",
		CatalogAction: "self_mod.install_packages", DeliveryAction: "install_packages", Payload: payload})
	if _, err := op.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); code(err) != codes.InvalidArgument {
		t.Fatalf("operator without as_user: %v", err)
	}
	admin := userClients(t, srv, scopedAdmin)
	if _, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: owner}); code(err) != codes.PermissionDenied {
		t.Fatalf("user token as another user: %v", err)
	}
	if _, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, Reason: strings.Repeat("x", 281)}); code(err) != codes.InvalidArgument {
		t.Fatalf("281-character reason: %v", err)
	}
	if _, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: "hold_nope", Outcome: guardv1.Outcome_OUTCOME_APPROVE}); code(err) != codes.NotFound {
		t.Fatalf("unknown hold: %v", err)
	}
	if st := pendingStatus(t, srv, h.GetId()); st != "pending" {
		t.Fatalf("refused calls touched the hold: %s", st)
	}

	// Approve of a delivery-action hold: a ReplayAction push for the
	// session's runner commits with the resolution.
	if _, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
		t.Fatal(err)
	}
	p := lastPush(t, srv, "replay")
	r := p.GetReplay()
	if r.GetHoldId() != h.GetId() || r.GetDeliveryAction() != "install_packages" || r.GetCatalogAction() != "self_mod.install_packages" ||
		!proto.Equal(r.GetPayload(), payload) || p.GetSessionId() != "sess-1" ||
		p.GetAgentGroupId() == "" || p.GetAgentGroupId() != h.GetAgentGroupId() {
		t.Fatalf("replay push: %v", p)
	}

	// Reject with a reason: the requester is told, with the reason.
	h2 := createOn(t, srv, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "create researcher"})
	reason := strings.Repeat("é", 280) // 280 characters, more bytes
	res, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: h2.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetHold().GetReason() != reason || res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_REJECTED {
		t.Fatalf("rejected hold: %v", res.GetHold())
	}
	n := lastPush(t, srv, "notify").GetNotify()
	if n.GetKind() != guardv1.NoticeKind_NOTICE_KIND_REJECTED || n.GetHoldId() != h2.GetId() || !strings.Contains(n.GetText(), reason) {
		t.Fatalf("reject notice: %v", n)
	}
	if _, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: h2.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); code(err) != codes.FailedPrecondition {
		t.Fatalf("approve after reject: %v", err)
	}
}

func lastPush(t *testing.T, srv *testserver.Server, kind string) *guardv1.Push {
	t.Helper()
	var body []byte
	var runner string
	err := srv.Pool.QueryRow(context.Background(), `SELECT body, COALESCE(runner_id, '') FROM runner_pushes WHERE kind = $1 ORDER BY created_at DESC LIMIT 1`, kind).Scan(&body, &runner)
	if err != nil {
		t.Fatalf("no %s push: %v", kind, err)
	}
	if runner != "r1" {
		t.Fatalf("push for runner %q, want r1 (the session's)", runner)
	}
	p := &guardv1.Push{}
	if err := proto.Unmarshal(body, p); err != nil {
		t.Fatal(err)
	}
	return p
}

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

// TestRequestAwaitListGet: a bridge's Request, a blocking Await released by
// the resolution on another replica, and List/Get visibility per principal.
func TestRequestAwaitListGet(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	seed(t, a)
	b := testserver.StartOn(t, a.URL)
	bridgeTok := a.BridgeToken(t, "slack")
	bridgeA := testserver.ClientsFor(a.Conn(t, bridgeTok, ""))
	bridgeB := testserver.ClientsFor(b.Conn(t, bridgeTok, ""))
	ctx := context.Background()

	for _, bad := range []*guardv1.RequestRequest{
		{Kind: "cli_command", Card: &guardv1.HoldCard{Title: "x"}},
		{Kind: "Bad Kind", Card: &guardv1.HoldCard{Title: "x"}},
		{Kind: approvals.KindChannelRegistration},
	} {
		if _, err := bridgeA.Approvals.Request(ctx, bad); code(err) != codes.InvalidArgument {
			t.Errorf("Request(%v): want InvalidArgument, got %v", bad, err)
		}
	}
	if _, err := userClients(t, a, owner).Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "onecli_credential", Card: &guardv1.HoldCard{Title: "x"}}); code(err) != codes.PermissionDenied {
		t.Fatalf("user token Request: %v", err)
	}

	req := &guardv1.RequestRequest{Kind: approvals.KindChannelRegistration, Card: &guardv1.HoldCard{Title: "Register chat", DedupKey: "chan:mg-9",
		Options: []*guardv1.HoldOption{{Label: "Connect", Value: "connect"}, {Label: "Reject", Value: "reject"}}}, ApproverScope: global}
	rr, err := bridgeA.Approvals.Request(ctx, req)
	if err != nil || !rr.GetCreated() || !rr.GetUndelivered() {
		t.Fatalf("Request: %v %v", rr, err)
	}
	again, err := bridgeB.Approvals.Request(ctx, req)
	if err != nil || again.GetCreated() || again.GetHold().GetId() != rr.GetHold().GetId() {
		t.Fatalf("deduplicated Request: %v %v", again, err)
	}
	id := rr.GetHold().GetId()

	// Await times out while pending.
	aw, err := bridgeB.Approvals.Await(ctx, &guardv1.AwaitRequest{Id: id, Timeout: durationpb.New(50 * time.Millisecond)})
	if err != nil || aw.GetResolved() || aw.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("Await timeout: %v %v", aw, err)
	}
	done := make(chan *guardv1.AwaitResponse, 1)
	go func() {
		aw, err := bridgeB.Approvals.Await(ctx, &guardv1.AwaitRequest{Id: id, Timeout: durationpb.New(10 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		done <- aw
	}()

	// Visibility: a scoped admin may not resolve a global hold, so neither
	// lists nor gets it; the owner does.
	sc := userClients(t, a, scopedAdmin)
	if l, err := sc.Approvals.List(ctx, &guardv1.ListRequest{}); err != nil || len(l.GetHolds()) != 0 {
		t.Fatalf("scoped admin's list: %v %v", l, err)
	}
	if _, err := sc.Approvals.Get(ctx, &guardv1.GetRequest{Id: id}); code(err) != codes.NotFound {
		t.Fatalf("scoped admin's get: %v", err)
	}
	ow := userClients(t, a, owner)
	if l, err := ow.Approvals.List(ctx, &guardv1.ListRequest{Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, Kind: approvals.KindChannelRegistration}); err != nil || len(l.GetHolds()) != 1 {
		t.Fatalf("owner's list: %v %v", l, err)
	}
	if l, err := bridgeA.Approvals.List(ctx, &guardv1.ListRequest{EligibleForMe: true, AsUser: scopedAdmin}); err != nil || len(l.GetHolds()) != 0 {
		t.Fatalf("bridge list eligible for the scoped admin: %v %v", l, err)
	}
	if _, err := ow.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, Choice: "nope"}); code(err) != codes.InvalidArgument {
		t.Fatalf("unknown choice: %v", err)
	}
	if _, err := bridgeA.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, Choice: "connect", AsUser: owner}); err != nil {
		t.Fatal(err)
	}
	select {
	case aw := <-done:
		if !aw.GetResolved() || aw.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED || aw.GetHold().GetChoice() != "connect" {
			t.Fatalf("Await after resolve: %v", aw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Await never returned")
	}

	// Runners see the holds of their sessions only.
	h := createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	r1 := testserver.ClientsFor(a.Conn(t, a.Token(t, "runner", "r1", ""), ""))
	r2 := testserver.ClientsFor(a.Conn(t, a.Token(t, "runner", "r2", ""), ""))
	if l, err := r1.Approvals.List(ctx, &guardv1.ListRequest{}); err != nil || len(l.GetHolds()) != 1 || l.GetHolds()[0].GetId() != h.GetId() {
		t.Fatalf("r1 list: %v %v", l, err)
	}
	if _, err := r2.Approvals.Get(ctx, &guardv1.GetRequest{Id: h.GetId()}); code(err) != codes.NotFound {
		t.Fatalf("r2 get of r1's hold: %v", err)
	}
	if _, err := r2.Approvals.Await(ctx, &guardv1.AwaitRequest{Id: h.GetId()}); code(err) != codes.NotFound {
		t.Fatalf("r2 await of r1's hold: %v", err)
	}
}

// TestCreateInCallersTransactionRollsBack: a hold created in a transaction
// that rolls back leaves no hold and no event.
func TestCreateInCallersTransactionRollsBack(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	_ = pgx.BeginFunc(context.Background(), srv.Pool, func(tx pgx.Tx) error {
		res, err := srv.Deps().Approvals.CreateHoldTx(context.Background(), tx, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1"})
		if err != nil || !res.Created {
			t.Fatalf("create: %v %v", res, err)
		}
		return context.Canceled
	})
	if n := count(t, srv.Pool, `SELECT (SELECT count(*) FROM holds) + (SELECT count(*) FROM hold_events)`); n != 0 {
		t.Fatalf("rolled-back create left %d rows", n)
	}
}

// TestApprovedHandlersIsolated ports the seed's "a throwing callback does
// not block the others": a failing or panicking handler is logged, the next
// one still runs, and the hold stays approved.
func TestApprovedHandlersIsolated(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	var ran []string
	svc := srv.Deps().Approvals
	svc.OnApproved("test_isolation", func(context.Context, *guardv1.Hold) error { ran = append(ran, "boom"); panic("boom") })
	svc.OnApproved("test_isolation", func(context.Context, *guardv1.Hold) error { ran = append(ran, "err"); return context.DeadlineExceeded })
	svc.OnApproved("test_isolation", func(context.Context, *guardv1.Hold) error { ran = append(ran, "after"); return nil })
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_isolation", SessionID: "sess-1", Title: "t"})
	res, err := userClients(t, srv, owner).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ran, ",") != "boom,err,after" || res.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("handlers ran %v; hold %v", ran, res.GetHold().GetStatus())
	}
	if st := pendingStatus(t, srv, h.GetId()); st != "approved" {
		t.Fatalf("status after failing handlers: %s", st)
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

// TestConcurrentWritersNoEventMissed: many transactions creating and
// resolving holds at once; a follower on another replica sees every event
// exactly once, cursors strictly increasing (a smaller cursor committing
// after a larger one was read would be lost without the event lock).
func TestConcurrentWritersNoEventMissed(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	seed(t, a)
	b := testserver.StartOn(t, a.URL)
	w := watch(t, b.Operator(t), &guardv1.WatchRequest{FromNow: true})
	const writers, each = 8, 15
	ownerC := userClients(t, a, owner)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				var res approvals.CreateResult
				err := pgx.BeginFunc(context.Background(), a.Pool, func(tx pgx.Tx) error {
					var err error
					res, err = a.Deps().Approvals.CreateHoldTx(context.Background(), tx, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := ownerC.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: res.Hold.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := w.waitFor(t, 2*writers*each)
	seen := map[string]bool{}
	for i, ev := range evs {
		if i > 0 && ev.GetCursor() <= evs[i-1].GetCursor() {
			t.Fatalf("cursor %d after %d", ev.GetCursor(), evs[i-1].GetCursor())
		}
		k := ev.GetHold().GetId() + ev.GetType().String()
		if seen[k] {
			t.Fatalf("event %s twice", k)
		}
		seen[k] = true
	}
	if len(evs) != 2*writers*each {
		t.Fatalf("%d events, want %d", len(evs), 2*writers*each)
	}
}

// TestAnEarlierCursorStillInFlightIsNotSkipped: writers commit their events
// in parallel, so a hold whose event drew the smaller cursor can commit
// after one with a larger cursor. The readers of both replicas must wait
// for it (a reader that read the larger one alone would advance past the
// smaller for good: an approval lost to every Watch, webhook and bridge).
func TestAnEarlierCursorStillInFlightIsNotSkipped(t *testing.T) {
	t.Parallel()
	a, onA, onB := twoWatchedReplicas(t)
	ctx := context.Background()

	slow, err := a.Pool.Begin(ctx) // draws the smaller cursor, commits last
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	first, err := a.Deps().Approvals.CreateHoldTx(ctx, slow, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	quick := make(chan *guardv1.Hold, 1)
	go func() { // commits at once (a writer never waits for another)
		h, err := createOnErr(a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "quick"})
		if err != nil {
			t.Error(err)
		}
		quick <- h
	}()
	second := <-quick
	if second == nil {
		t.FailNow()
	}
	// Both replicas' readers, woken by the quick one's notification, wait
	// for the slow writer (settling the gap its cursor leaves) instead of
	// reading past its cursor.
	var pid int
	if err := slow.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	waitForWaitersOn(t, a.Pool, pid, 2)
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*watcher{"A": onA, "B": onB} {
		evs := w.waitFor(t, 2)
		if len(evs) != 2 || evs[0].GetHold().GetId() != first.Hold.GetId() || evs[1].GetHold().GetId() != second.GetId() ||
			evs[0].GetCursor() >= evs[1].GetCursor() {
			t.Fatalf("replica %s saw %v, want the slow hold's event then the quick one's", name, evs)
		}
	}
}

// twoWatchedReplicas starts replicas A and B on one seeded database, each
// with an operator's Watch from now; A is returned to write through.
func twoWatchedReplicas(t *testing.T) (*testserver.Server, *watcher, *watcher) {
	t.Helper()
	a := testserver.Start(t)
	seed(t, a)
	b := testserver.StartOn(t, a.URL)
	return a, watch(t, a.Operator(t), &guardv1.WatchRequest{FromNow: true}), watch(t, b.Operator(t), &guardv1.WatchRequest{FromNow: true})
}

// createOnErr is createOn for goroutines: the error instead of t.Fatal.
func createOnErr(srv *testserver.Server, req approvals.CreateRequest) (*guardv1.Hold, error) {
	var res approvals.CreateResult
	err := pgx.BeginFunc(context.Background(), srv.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = srv.Deps().Approvals.CreateHoldTx(context.Background(), tx, req)
		return err
	})
	return res.Hold, err
}

// waitForWaitersOn waits until n sessions wait for a transaction (or a
// subtransaction: the event is inserted under a savepoint) of backend pid.
func waitForWaitersOn(t *testing.T, pool *pgxpool.Pool, pid, n int) {
	t.Helper()
	testserver.Eventually(t, 10*time.Second, fmt.Sprintf("%d readers to wait for backend %d (a reader read past a cursor still in flight?)", n, pid), func() bool {
		var waiting int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks w
			WHERE w.locktype = 'transactionid' AND NOT w.granted AND w.transactionid IN (
				SELECT h.transactionid FROM pg_locks h WHERE h.locktype = 'transactionid' AND h.granted AND h.pid = $1)`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting >= n
	})
}

// TestGapsAreSettledNeverSkipped: a writer that rolls back after drawing a
// cursor leaves a gap; readers tombstone it and deliver what follows. A
// writer that drew a cursor a reader has already settled cannot commit an
// event there: an insert at that cursor fails (insertEvent then retries
// under a fresh one, TestAnEventWhoseCursorWasSettledIsRetried), so no
// event lands behind a reader's back.
func TestGapsAreSettledNeverSkipped(t *testing.T) {
	t.Parallel()
	a, onA, onB := twoWatchedReplicas(t)
	ctx := context.Background()

	// A rolled-back writer's cursor.
	rolled, err := a.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Deps().Approvals.CreateHoldTx(ctx, rolled, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "rolled back"}); err != nil {
		t.Fatal(err)
	}
	if err := rolled.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// A writer caught between drawing its cursor and inserting.
	late, err := a.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	var drawn int64
	if err := late.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('hold_events', 'cursor'))`).Scan(&drawn); err != nil {
		t.Fatal(err)
	}
	after, err := createOnErr(a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "after the gaps"})
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*watcher{"A": onA, "B": onB} {
		evs := w.waitFor(t, 1)
		if len(evs) != 1 || evs[0].GetHold().GetId() != after.GetId() {
			t.Fatalf("replica %s saw %v, want only the event after the gaps", name, evs)
		}
	}
	if _, err := late.Exec(ctx, `INSERT INTO hold_events (cursor, hold_id, type, hold) VALUES ($1, 'h-late', 'requested', '{}')`, drawn); err == nil {
		t.Fatal("an event was inserted at a cursor the readers had passed")
	}
	var tombstones int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM hold_events WHERE type = 'skipped'`).Scan(&tombstones); err != nil || tombstones != 2 {
		t.Fatalf("%d tombstones (%v), want 2: the rolled-back cursor and the late one", tombstones, err)
	}
}

// TestMissedDispatchIsRecovered: an approval whose replica stopped between
// the commit and its handlers is dispatched later by a recovery loop, once;
// a normally dispatched approval is never run again.
func TestMissedDispatchIsRecovered(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	svc := srv.Deps().Approvals
	var mu sync.Mutex
	ran := map[string]int{}
	svc.OnApproved("test_dispatch", func(_ context.Context, h *guardv1.Hold) error {
		mu.Lock()
		defer mu.Unlock()
		ran[h.GetId()]++
		return nil
	})
	runs := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return ran[id]
	}
	ctx := context.Background()

	normal := createOn(t, srv, approvals.CreateRequest{Kind: "test_dispatch", SessionID: "sess-1", Title: "t"})
	if _, err := userClients(t, srv, owner).Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: normal.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
		t.Fatal(err)
	}
	missed := createOn(t, srv, approvals.CreateRequest{Kind: "test_dispatch", SessionID: "sess-1", Title: "t"})
	// The approval committed, then its replica stopped: no handler ran.
	exec(t, srv.Pool, `UPDATE holds SET status = 'approved', resolved_at = now() - interval '10 minutes', resolver = $2 WHERE id = $1`, missed.GetId(), owner)
	exec(t, srv.Pool, `UPDATE holds SET resolved_at = now() - interval '10 minutes' WHERE id = $1`, normal.GetId())
	noHandler := createOn(t, srv, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	if _, err := userClients(t, srv, owner).Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: noHandler.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
		t.Fatal(err)
	}

	if _, err := svc.DispatchMissed(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); runs(missed.GetId()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the missed approval was never dispatched")
		}
	}
	if n, err := svc.DispatchMissed(ctx); err != nil || n != 0 {
		t.Fatalf("second recovery pass: %d %v", n, err)
	}
	if runs(missed.GetId()) != 1 || runs(normal.GetId()) != 1 {
		t.Fatalf("handler runs: %v", ran)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM holds WHERE status = 'approved' AND dispatched_at IS NULL`); n != 0 {
		t.Fatalf("%d approved holds left undispatched", n)
	}
}

// TestAnEventWhoseCursorWasSettledIsRetried: a writer whose drawn cursor a
// reader settled first (tombstoned) does not fail: its event is inserted
// again, under a fresh cursor, and the rest of its transaction stands.
func TestAnEventWhoseCursorWasSettledIsRetried(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	seed(t, a)
	ctx := context.Background()
	var next int64
	if err := a.Pool.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('hold_events', 'cursor')) + 1`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	// A reader settled the cursor the next writer will draw.
	if _, err := a.Pool.Exec(ctx, `INSERT INTO hold_events (cursor, hold_id, type, hold) VALUES ($1, '', 'skipped', '{}')`, next); err != nil {
		t.Fatal(err)
	}
	h, err := createOnErr(a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "drawn a settled cursor"})
	if err != nil {
		t.Fatalf("a writer whose cursor was settled failed: %v", err)
	}
	var cursor int64
	if err := a.Pool.QueryRow(ctx, `SELECT cursor FROM hold_events WHERE hold_id = $1 AND type = 'requested'`, h.GetId()).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	if cursor <= next {
		t.Fatalf("the event has cursor %d, want one after the settled %d", cursor, next)
	}
}
