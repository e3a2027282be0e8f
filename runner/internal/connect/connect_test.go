package connect

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestAppliedPersistsAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "applied.log")
	a, err := OpenApplied(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p1", "p2", "p2", "p3"} {
		if err := a.Mark(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Mark("bad\nid"); err == nil {
		t.Fatal("an id with a newline was accepted")
	}
	a.Close()
	b, err := OpenApplied(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, id := range []string{"p1", "p2", "p3"} {
		if !b.Seen(id) {
			t.Fatalf("%s forgotten after reopen", id)
		}
	}
	if b.Seen("p4") {
		t.Fatal("p4 seen but never applied")
	}
	// Bounded: beyond max the oldest ids are forgotten, and the file compacts.
	for _, id := range []string{"p4", "p5", "p6", "p7", "p8", "p9", "p10"} {
		if err := b.Mark(id); err != nil {
			t.Fatal(err)
		}
	}
	if b.Seen("p1") || !b.Seen("p10") {
		t.Fatal("bound not applied")
	}
}

// fakeRegistry serves Connect: it sends the pushes of each round and
// records hellos and acks.
type fakeRegistry struct {
	guardv1.UnimplementedRegistryServer
	rounds [][]*guardv1.Push
	mu     sync.Mutex
	hellos []*guardv1.ConnectHello
	acks   []*guardv1.PushAck
	round  int
	acked  chan struct{}
}

func (f *fakeRegistry) Connect(st grpc.BidiStreamingServer[guardv1.ConnectRequest, guardv1.ConnectResponse]) error {
	first, err := st.Recv()
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.hellos = append(f.hellos, first.GetHello())
	var pushes []*guardv1.Push
	if f.round < len(f.rounds) {
		pushes = f.rounds[f.round]
	}
	f.round++
	f.mu.Unlock()
	for _, p := range pushes {
		if err := st.Send(&guardv1.ConnectResponse{Frame: &guardv1.ConnectResponse_Push{Push: p}}); err != nil {
			return err
		}
	}
	want := map[string]bool{}
	for _, p := range pushes {
		want[p.GetId()] = true
	}
	for len(want) > 0 {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		if a := req.GetAck(); a != nil {
			f.mu.Lock()
			f.acks = append(f.acks, a)
			f.mu.Unlock()
			delete(want, a.GetPushId())
		}
	}
	f.acked <- struct{}{}
	return nil // end the stream: the client reconnects
}

type countingApplier struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingApplier) Apply(_ context.Context, p *guardv1.Push) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[p.GetId()]++
	return nil
}

func TestPushesApplyOnceAndAreAcked(t *testing.T) {
	push := func(id, session string) *guardv1.Push {
		return &guardv1.Push{Id: id, SessionId: session, AgentGroupId: "g", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}
	}
	f := &fakeRegistry{acked: make(chan struct{}, 4), rounds: [][]*guardv1.Push{
		{push("p1", "s1"), push("p1", "s1"), push("p2", "s2")}, // a duplicate within a stream
		{push("p1", "s1"), push("p3", "s1")},                   // re-sent after a reconnect
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	guardv1.RegisterRegistryServer(srv, f)
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	applied, err := OpenApplied(filepath.Join(t.TempDir(), "applied.log"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer applied.Close()
	app := &countingApplier{n: map[string]int{}}
	c := &Client{Registry: guardv1.NewRegistryClient(conn), RunnerID: "r1", InstanceID: "inst_1",
		Applied: applied, Applier: app, Heartbeat: time.Hour, MinBackoff: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go c.Run(ctx)
	for range 2 {
		select {
		case <-f.acked:
		case <-ctx.Done():
			t.Fatal("pushes not acked")
		}
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	for id, want := range map[string]int{"p1": 1, "p2": 1, "p3": 1} {
		if app.n[id] != want {
			t.Fatalf("push %s applied %d times, want %d (all: %v)", id, app.n[id], want, app.n)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.hellos) < 2 || f.hellos[0].GetRunnerId() != "r1" || f.hellos[0].GetInstanceId() != "inst_1" {
		t.Fatalf("hellos = %v", f.hellos)
	}
	for _, a := range f.acks {
		if !a.GetOk() {
			t.Fatalf("ack not ok: %v", a)
		}
	}
}
