package sessions

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// flakyGuard is the server deciding a replay (ApplyAction with the hold):
// unreachable the first time, failing closed (the database refused the
// decision log) the second, then allowing and applying.
type flakyGuard struct{ calls atomic.Int64 }

func (g *flakyGuard) ApplyAction(context.Context, *guardv1.ApplyActionRequest, ...grpc.CallOption) (*guardv1.ApplyActionResponse, error) {
	switch g.calls.Add(1) {
	case 1:
		return nil, status.Error(codes.Unavailable, "server down")
	case 2:
		return &guardv1.ApplyActionResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_DENY, Reason: "guard failure (failing closed)"}}, nil
	}
	return &guardv1.ApplyActionResponse{DecisionId: "dec-1", Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}}, nil
}

// resendingServer plays the server's push delivery: each Connect stream
// sends the replay again until the runner acks it ok (as a reconnect
// re-sends every unacked push), recording the acks.
type resendingServer struct {
	guardv1.UnimplementedRegistryServer
	push *guardv1.Push
	mu   sync.Mutex
	acks []*guardv1.PushAck
	done chan struct{}
}

func (s *resendingServer) Connect(st grpc.BidiStreamingServer[guardv1.ConnectRequest, guardv1.ConnectResponse]) error {
	if _, err := st.Recv(); err != nil { // hello
		return err
	}
	select {
	case <-s.done:
		<-st.Context().Done()
		return nil
	default:
	}
	if err := st.Send(&guardv1.ConnectResponse{Frame: &guardv1.ConnectResponse_Push{Push: s.push}}); err != nil {
		return err
	}
	for {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		if a := req.GetAck(); a != nil {
			s.mu.Lock()
			s.acks = append(s.acks, a)
			s.mu.Unlock()
			if a.GetOk() {
				close(s.done)
			}
			return nil // end the stream: the runner reconnects, the push is due again
		}
	}
}

// Issue 13: a replay the guard could not decide (unreachable, or a DENY
// "guard failure (failing closed)") was acknowledged, and the approval lost.
// It ran nothing and used no grant: it is tried again with back-off, and the
// push is acknowledged once, ok, after the action ran once.
func TestReplayNotDecidedIsRetriedAndAckedOnlyOnceApplied(t *testing.T) {
	guard := &flakyGuard{}
	var runs atomic.Int64
	actions := delivery.NewRegistry(nil)
	if err := actions.Register(delivery.Action{Name: "install_packages", CatalogAction: "self_mod.install_packages", ApprovalKind: "install_packages",
		Run: func(context.Context, delivery.Call) delivery.Outcome {
			runs.Add(1)
			return delivery.Done(&structpb.Struct{}, "installed")
		}}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := newManagerWith(t, &fakeRegistry{}, &delivery.Engine{Registry: actions, Applier: guard})

	srv := &resendingServer{done: make(chan struct{}), push: &guardv1.Push{Id: "push-replay", SessionId: "s-replay", AgentGroupId: "g1",
		Body: &guardv1.Push_Replay{Replay: &guardv1.ReplayAction{HoldId: "h-1", DeliveryAction: "install_packages",
			CatalogAction: "self_mod.install_packages", Payload: &structpb.Struct{}}}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	guardv1.RegisterRegistryServer(gs, srv)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	applied, err := connect.OpenApplied(filepath.Join(t.TempDir(), "applied.log"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { applied.Close() })
	c := &connect.Client{Registry: guardv1.NewRegistryClient(conn), RunnerID: "r1", InstanceID: "inst_1",
		Applied: applied, Applier: m, Heartbeat: time.Hour, MinBackoff: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go c.Run(ctx)

	select {
	case <-srv.done:
	case <-ctx.Done():
		srv.mu.Lock()
		defer srv.mu.Unlock()
		t.Fatalf("replay never acked ok; acks = %v", srv.acks)
	}
	srv.mu.Lock()
	acks := srv.acks
	srv.mu.Unlock()
	if len(acks) != 1 || !acks[0].GetOk() {
		t.Fatalf("acks = %v, want one ok ack, after the action ran", acks)
	}
	if n := guard.calls.Load(); n != 3 {
		t.Fatalf("guard asked %d times, want 3 (unreachable, failed closed, allowed)", n)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("approved action ran %d times, want once", n)
	}
	if !applied.Seen("push-replay") {
		t.Fatal("the replay that ran is not remembered as applied")
	}
}

// movedGuard refuses: this runner no longer hosts the session.
type movedGuard struct{}

func (movedGuard) ApplyAction(context.Context, *guardv1.ApplyActionRequest, ...grpc.CallOption) (*guardv1.ApplyActionResponse, error) {
	return nil, status.Error(codes.PermissionDenied, `runner "r1" does not host session "s-moved"`)
}

// Issue 13: a push queued during a session move reached the old runner,
// which was refused and acknowledged it as done. The refusal is not an
// answer about the action: the push is reported not applied (so, if it is
// still this runner's, it is sent again — to the new host once the move
// commits) and the agent is not told it failed.
func TestReplayRefusedBecauseTheSessionMovedIsNotAckedAsDone(t *testing.T) {
	var runs atomic.Int64
	actions := delivery.NewRegistry(nil)
	if err := actions.Register(delivery.Action{Name: "install_packages", CatalogAction: "self_mod.install_packages", ApprovalKind: "install_packages",
		Run: func(context.Context, delivery.Call) delivery.Outcome {
			runs.Add(1)
			return delivery.Done(&structpb.Struct{}, "installed")
		}}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := newManagerWith(t, &fakeRegistry{}, &delivery.Engine{Registry: actions, Applier: movedGuard{}})
	push := &guardv1.Push{Id: "push-moved", SessionId: "s-moved", AgentGroupId: "g1",
		Body: &guardv1.Push_Replay{Replay: &guardv1.ReplayAction{HoldId: "h-1", DeliveryAction: "install_packages",
			CatalogAction: "self_mod.install_packages", Payload: &structpb.Struct{}}}}
	err := m.Apply(context.Background(), push)
	if err == nil || connect.IsRetry(err) {
		t.Fatalf("Apply = %v, want a failure reported in the ack (not applied, not retried here)", err)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the action ran %d times", n)
	}
	if s := m.Get("s-moved"); s != nil && s.Inbox.Len() != 0 {
		t.Fatalf("the agent was told something about a replay its runner no longer hosts (%d notices)", s.Inbox.Len())
	}
}
