package connect

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// hangingRegistry answers the first `answer` heartbeats of each stream,
// then none (a replica that hangs, a link that blackholes), keeping the
// stream open.
type hangingRegistry struct {
	guardv1.UnimplementedRegistryServer
	answer int
	hellos chan struct{}
}

func (h *hangingRegistry) Connect(st grpc.BidiStreamingServer[guardv1.ConnectRequest, guardv1.ConnectResponse]) error {
	if _, err := st.Recv(); err != nil {
		return err
	}
	h.hellos <- struct{}{}
	answered := 0
	for {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		if req.GetHeartbeat() != nil && answered < h.answer {
			answered++
			if err := st.Send(&guardv1.ConnectResponse{Frame: &guardv1.ConnectResponse_Lease{Lease: &guardv1.LeaseRenewed{Ttl: durationpb.New(7 * time.Second)}}}); err != nil {
				return err
			}
		}
	}
}

// Issue 29, item 10: the runner measures its lease from the send time of
// each heartbeat the server answered, and a stream whose heartbeats go
// unanswered (the replica hung, the link blackholed) is given up and made
// again instead of waiting on it until the heal.
func TestHeartbeatAnswersRenewAndAHungStreamIsGivenUp(t *testing.T) {
	h := &hangingRegistry{answer: 2, hellos: make(chan struct{}, 8)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	guardv1.RegisterRegistryServer(srv, h)
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

	type renewal struct {
		sent, seen time.Time
		ttl        time.Duration
	}
	var mu sync.Mutex
	var renewals []renewal
	c := &Client{Registry: guardv1.NewRegistryClient(conn), RunnerID: "r1", InstanceID: "inst_1",
		Applied: applied, Applier: &countingApplier{n: map[string]int{}}, Heartbeat: 50 * time.Millisecond,
		MinBackoff: time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnRenewed: func(sent time.Time, ttl time.Duration) {
			mu.Lock()
			renewals = append(renewals, renewal{sent: sent, seen: time.Now(), ttl: ttl})
			mu.Unlock()
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go c.Run(ctx)
	for i := range 2 {
		select {
		case <-h.hellos:
		case <-ctx.Done():
			t.Fatalf("stream %d never opened: the hung one was not given up", i+1)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(renewals) < 2 {
		t.Fatalf("%d renewals reported, want the 2 answered heartbeats", len(renewals))
	}
	for _, r := range renewals[:2] {
		if r.ttl != 7*time.Second || r.sent.After(r.seen) || r.sent.IsZero() {
			t.Fatalf("renewal %+v: want the answer's ttl and a send time before the answer", r)
		}
	}
	if !renewals[0].sent.Before(renewals[1].sent) {
		t.Fatalf("renewals out of order: %+v", renewals)
	}
}
