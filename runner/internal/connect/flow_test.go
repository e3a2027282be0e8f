package connect

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// gatedApplier blocks every Apply until open is closed (a busy session).
type gatedApplier struct {
	open chan struct{}
	countingApplier
}

func (g *gatedApplier) Apply(ctx context.Context, p *guardv1.Push) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.countingApplier.Apply(ctx, p)
}

func dialFake(t *testing.T, f guardv1.RegistryServer) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	guardv1.RegisterRegistryServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Issue 13: with 2,000 approvals at once the runner dropped pushes on a full
// per-session queue, and they sat unapplied on the live stream. Every push
// of one busy session is now queued, applied once and acked, in order.
func TestABurstForOneBusySessionIsNeverDropped(t *testing.T) {
	const n = 1000
	var burst []*guardv1.Push
	for i := range n {
		burst = append(burst, &guardv1.Push{Id: fmt.Sprint("p", i), SessionId: "s1", AgentGroupId: "g", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}})
	}
	f := &fakeRegistry{acked: make(chan struct{}, 1), rounds: [][]*guardv1.Push{burst}}
	applied, err := OpenApplied(filepath.Join(t.TempDir(), "applied.log"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer applied.Close()
	app := &gatedApplier{open: make(chan struct{}), countingApplier: countingApplier{n: map[string]int{}}}
	c := &Client{Registry: guardv1.NewRegistryClient(dialFake(t, f)), RunnerID: "r1", InstanceID: "inst_1",
		Applied: applied, Applier: app, Heartbeat: time.Hour, MinBackoff: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go c.Run(ctx)
	// The session is busy until the whole burst has arrived and is queued.
	for queued := 0; queued < n; {
		c.mu.Lock()
		queued = len(c.inflight)
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatalf("only %d of %d pushes queued while the session was busy", queued, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(app.open)
	select {
	case <-f.acked:
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("only %d of %d pushes acked", len(f.acks), n)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	for _, p := range burst {
		if app.n[p.GetId()] != 1 {
			t.Fatalf("push %s applied %d times", p.GetId(), app.n[p.GetId()])
		}
	}
}

// releasingRegistry records a release frame and ends the stream.
type releasingRegistry struct {
	guardv1.UnimplementedRegistryServer
	mu       sync.Mutex
	released []string
	streams  int
}

func (r *releasingRegistry) Connect(st grpc.BidiStreamingServer[guardv1.ConnectRequest, guardv1.ConnectResponse]) error {
	first, err := st.Recv()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.streams++
	r.mu.Unlock()
	_ = st.Send(&guardv1.ConnectResponse{Frame: &guardv1.ConnectResponse_Lease{Lease: &guardv1.LeaseRenewed{}}})
	for {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		if req.GetRelease() != nil {
			r.mu.Lock()
			r.released = append(r.released, first.GetHello().GetInstanceId())
			r.mu.Unlock()
			return nil
		}
	}
}

// A clean stop sends the release frame on the live stream, and the client
// does not reconnect afterwards.
func TestReleaseGivesTheLeaseUpAndStopsReconnecting(t *testing.T) {
	f := &releasingRegistry{}
	applied, err := OpenApplied(filepath.Join(t.TempDir(), "applied.log"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer applied.Close()
	up := make(chan bool, 8)
	c := &Client{Registry: guardv1.NewRegistryClient(dialFake(t, f)), RunnerID: "r1", InstanceID: "inst_1",
		Applied: applied, Applier: &countingApplier{n: map[string]int{}}, Heartbeat: time.Hour, MinBackoff: time.Millisecond,
		OnConnected: func(u bool) { up <- u }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	if !<-up {
		t.Fatal("stream not up")
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Run kept going after the release")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.released) != 1 || f.released[0] != "inst_1" || f.streams != 1 {
		t.Fatalf("released = %v over %d streams, want inst_1 once on one stream", f.released, f.streams)
	}
}
