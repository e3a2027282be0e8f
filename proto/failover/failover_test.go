package failover

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// replica is a real gRPC server on loopback serving health, and a stream
// that ends with the stopping trailer when told.
type replica struct {
	lis  net.Listener
	srv  *grpc.Server
	hold chan struct{} // closed: the health answers stop (a hung replica)
}

func newReplica(t *testing.T) *replica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{lis: lis, hold: make(chan struct{})}
	hs := health.NewServer()
	r.srv = grpc.NewServer(grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		select {
		case <-r.hold: // hung: no answer until the caller gives up
			<-ctx.Done()
			return nil, ctx.Err()
		default:
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(r.srv, hs)
	go r.srv.Serve(lis)
	t.Cleanup(r.srv.Stop)
	return r
}

func (r *replica) addr() string { return r.lis.Addr().String() }

// on is the replica a health check reaches now.
func on(t *testing.T, conn *grpc.ClientConn) string {
	t.Helper()
	var p peer.Peer
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil || p.Addr == nil {
		return ""
	}
	return p.Addr.String()
}

func dialBook(t *testing.T, server string) (*Book, *grpc.ClientConn) {
	t.Helper()
	b, err := New(server, Options{Probe: 100 * time.Millisecond, ProbeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	target, opts := b.DialOptions()
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return b, conn
}

// TestAHungReplicaIsLeftAndNotDialledFirst: the probe finds the replica in
// use hung, avoids it and closes its connection; calls go to the other
// replica, and the hung one is not dialled again while it is avoided.
func TestAHungReplicaIsLeftAndNotDialledFirst(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	book, conn := dialBook(t, a.addr()+","+b.addr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go book.Watch(ctx, conn)

	first := ""
	deadline := time.Now().Add(10 * time.Second)
	for first == "" && time.Now().Before(deadline) {
		first = on(t, conn)
	}
	hung, other := a, b
	if first == b.addr() {
		hung, other = b, a
	}
	close(hung.hold)
	cut := time.Now()
	for on(t, conn) != other.addr() {
		if time.Since(cut) > 5*time.Second {
			t.Fatalf("still not on the healthy replica %s 5 s after %s hung", other.addr(), hung.addr())
		}
	}
	t.Logf("moved in %s", time.Since(cut).Round(time.Millisecond))
	if !book.Avoided(hung.addr()) || book.Avoided(other.addr()) {
		t.Fatalf("avoided: hung %v, healthy %v; want true, false", book.Avoided(hung.addr()), book.Avoided(other.addr()))
	}
	if _, err := book.dial(ctx, hung.addr()); err == nil || !strings.Contains(err.Error(), "avoided") {
		t.Fatalf("dialling the avoided replica while another answers: %v, want a refusal", err)
	}
}

// TestTheOnlyAddressIsDialledEvenWhenAvoided: with nowhere else to go, an
// avoided address is still dialled (failing closed would be no server).
func TestTheOnlyAddressIsDialledEvenWhenAvoided(t *testing.T) {
	a := newReplica(t)
	book, _ := dialBook(t, a.addr())
	book.Avoid(a.addr(), "test", true)
	c, err := book.dial(context.Background(), a.addr())
	if err != nil {
		t.Fatalf("dialling the only address: %v", err)
	}
	c.Close()
}

// TestUnaryCallsGetADeadline: a call without one is bounded by UnaryTimeout.
func TestUnaryCallsGetADeadline(t *testing.T) {
	a := newReplica(t)
	close(a.hold)
	b, err := New(a.addr(), Options{UnaryTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	target, opts := b.DialOptions()
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 3*time.Second {
		t.Fatalf("a call to a hung replica without a deadline: %v after %s, want DeadlineExceeded after 200 ms", err, time.Since(start))
	}
}

// TestAStoppingTrailerAvoidsTheReplica: a stream ended with the stopping
// trailer marks its replica avoided (its connection left to drain).
func TestAStoppingTrailerAvoidsTheReplica(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	book, _ := dialBook(t, a.addr()+","+b.addr())
	w := &watched{ClientStream: fakeStream{addr: a.lis.Addr(), trailer: metadata.Pairs(StoppingKey, "1")}, book: book}
	if err := w.RecvMsg(nil); status.Code(err) != codes.Unavailable {
		t.Fatalf("RecvMsg: %v", err)
	}
	if !book.Avoided(a.addr()) || book.Avoided(b.addr()) {
		t.Fatalf("avoided after the trailer: stopping %v, other %v; want true, false", book.Avoided(a.addr()), book.Avoided(b.addr()))
	}
	w2 := &watched{ClientStream: fakeStream{addr: b.lis.Addr()}, book: book}
	_ = w2.RecvMsg(nil)
	if book.Avoided(b.addr()) {
		t.Fatal("a stream that ended without the trailer avoided its replica")
	}
}

type fakeStream struct {
	grpc.ClientStream
	addr    net.Addr
	trailer metadata.MD
}

func (f fakeStream) RecvMsg(any) error {
	return status.Error(codes.Unavailable, "server replica stopping")
}
func (f fakeStream) Trailer() metadata.MD { return f.trailer }
func (f fakeStream) Context() context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: f.addr})
}

// TestFollowMovesSeesAGoAway: a replica that sends GOAWAY (its maximum
// connection age) makes FollowMoves report the move once the connection is
// up again, with the time it left, so older streams are remade.
func TestFollowMovesSeesAGoAway(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 300 * time.Millisecond}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	_, conn := dialBook(t, lis.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	moved := make(chan time.Time, 1)
	go FollowMoves(ctx, conn, func(left time.Time) {
		select {
		case moved <- left:
		default:
		}
	})
	select {
	case left := <-moved:
		if !left.After(opened) {
			t.Fatalf("moved at %s, before the connection was up (%s)", left, opened)
		}
	case <-ctx.Done():
		t.Fatal("no move reported after the replica's GOAWAY")
	}
}
