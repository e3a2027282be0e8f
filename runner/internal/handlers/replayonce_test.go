package handlers

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// applyServer is a server that applies every cited action and records what
// it was asked: a database that forgot nothing it needs to remember here.
type applyServer struct {
	guardv1.UnimplementedRegistryServer
	mu   sync.Mutex
	reqs []*guardv1.ApplyActionRequest
}

func (a *applyServer) ApplyAction(_ context.Context, req *guardv1.ApplyActionRequest) (*guardv1.ApplyActionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, req)
	res := &guardv1.ApplyActionResponse{Message: "applied"}
	if req.GetGrant() != "" { // a replay, decided and applied here
		res.Decision, res.DecisionId = &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}, fmt.Sprintf("dec_%d", len(a.reqs))
	}
	return res, nil
}

// allowAll is a guard that allows every fresh action as decision id.
type allowAll struct{ id string }

func (g allowAll) Decide(context.Context, *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	return &guardv1.DecideResponse{DecisionId: g.id, Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}}, nil
}

type discard struct{}

func (discard) Notify(string, *agentv1.Notice)             {}
func (discard) NotifyOnce(string, string, *agentv1.Notice) {}

// engine is the delivery engine with the handlers of deps registered, the
// server srv applying, and every fresh action allowed as decision dec.
func engine(t *testing.T, srv *applyServer, deps Deps, dec string) *delivery.Engine {
	t.Helper()
	conn := serve(t, srv)
	deps.Conn = conn
	reg := delivery.NewRegistry(nil)
	if err := Register(reg, deps); err != nil {
		t.Fatal(err)
	}
	return &delivery.Engine{Registry: reg, Decider: allowAll{dec}, Applier: guardv1.NewRegistryClient(conn), Notifier: discard{}}
}

func (a *applyServer) PostChatMessage(context.Context, *guardv1.PostChatMessageRequest) (*guardv1.PostChatMessageResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, "no chat")
}

func serve(t *testing.T, srv guardv1.RegistryServer) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	guardv1.RegisterRegistryServer(s, srv)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Issue 29, item 11: a hold whose approval the database forgot was approved
// and replayed again, and its message stamped with the new ALLOW's id: the
// target could not tell it was the same message. A replay's message id is
// now its hold's, whichever decision allowed it; a fresh send's is its
// decision's.
func TestAReplayedMessageIsNamedByItsHold(t *testing.T) {
	srv := &applyServer{}
	e := engine(t, srv, Deps{}, "dec_fresh")
	p, _ := structpb.NewStruct(map[string]any{"to": "gB", "text": "hello"})
	s := delivery.Session{ID: "s1", GroupID: "gA"}
	for range 2 { // the second: its approval re-made after the database forgot it
		out := e.Replay(context.Background(), s, &guardv1.ReplayAction{HoldId: "hold_1", DeliveryAction: SendMessage, Payload: p})
		if out.Status.String() != "SEND_STATUS_DONE" {
			t.Fatalf("replay: %+v", out)
		}
	}
	if out := e.Submit(context.Background(), s, "r1", SendMessage, p); out.Status.String() != "SEND_STATUS_DONE" {
		t.Fatalf("fresh send: %+v", out)
	}
	var got []string
	for _, r := range srv.reqs {
		got = append(got, r.GetPayload().GetFields()["id"].GetStringValue())
	}
	if len(got) != 3 || got[0] != "m_hold_1" || got[1] != "m_hold_1" || got[2] != "m_dec_fresh" {
		t.Fatalf("stamped message ids %v, want [m_hold_1 m_hold_1 m_dec_fresh]", got)
	}
	// A replay names its hold and sends only the stamp: the payload is the server's.
	if r := srv.reqs[0]; r.GetGrant() != "hold_1" || r.GetDecisionId() != "" || len(r.GetPayload().GetFields()) != 1 {
		t.Fatalf("replay's apply: %v, want the hold named and only the message id", r)
	}
	if p.GetFields()["id"] != nil {
		t.Fatal("the caller's payload was changed")
	}
}

// The same for a self-modification: the hold replayed again after a runner
// restart (the record is in the data dir) re-applies the database's half
// but does not restart the container, nor give the on_wake message, again.
func TestAReplayedSelfModificationRestartsTheContainerOncePerHold(t *testing.T) {
	srv := &applyServer{}
	path := filepath.Join(t.TempDir(), "holds-applied.log")
	var restarts int
	var wakes []string
	deps := func(done Done) Deps {
		return Deps{Done: done,
			Restart: func(context.Context, delivery.Session, bool) (string, error) { restarts++; return "", nil },
			OnWake:  func(_ delivery.Session, id, _ string) { wakes = append(wakes, id) }}
	}
	pk, _ := structpb.NewStruct(map[string]any{"apt": []any{"cowsay"}})
	mcp, _ := structpb.NewStruct(map[string]any{"name": "fs", "command": "mcp-fs"})
	s := delivery.Session{ID: "s1", GroupID: "gA"}
	for i := range 2 {
		done, err := connect.OpenApplied(path, 0) // the runner restarted in between
		if err != nil {
			t.Fatal(err)
		}
		e := engine(t, srv, deps(done), "")
		for _, c := range []struct {
			action, hold string
			p            *structpb.Struct
		}{{InstallPackages, "hold_pk", pk}, {AddMCPServer, "hold_mcp", mcp}} {
			out := e.Replay(context.Background(), s, &guardv1.ReplayAction{HoldId: c.hold, DeliveryAction: c.action, Payload: c.p})
			if out.Status.String() != "SEND_STATUS_DONE" {
				t.Fatalf("replay %d of %s: %+v", i, c.action, out)
			}
		}
		done.Close()
	}
	if len(srv.reqs) != 4 {
		t.Fatalf("%d applies, want 4 (the database's half each time)", len(srv.reqs))
	}
	if restarts != 2 || len(wakes) != 2 || wakes[0] != "on_wake-hold_pk" || wakes[1] != "on_wake-hold_mcp" {
		t.Fatalf("restarts %d, on_wake %v; want one of each per hold, named by it", restarts, wakes)
	}
}
