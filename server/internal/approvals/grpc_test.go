package approvals_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
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
