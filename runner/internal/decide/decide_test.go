package decide

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// flakyGuard drops its first stream after the first frame, then answers
// every frame with an ALLOW whose decision id is the request id; request
// "bad" gets a per-frame error.
type flakyGuard struct {
	guardv1.UnimplementedGuardServer
	streams atomic.Int32
	mu      sync.Mutex
	seen    map[string]int
}

func (g *flakyGuard) DecideStream(st grpc.BidiStreamingServer[guardv1.DecideStreamRequest, guardv1.DecideStreamResponse]) error {
	n := g.streams.Add(1)
	for {
		f, err := st.Recv()
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.seen[f.GetRequest().GetRequestId()]++
		g.mu.Unlock()
		if n == 1 {
			return status.Error(codes.Unavailable, "replica going away")
		}
		resp := &guardv1.DecideStreamResponse{CorrelationId: f.GetCorrelationId()}
		if f.GetRequest().GetRequestId() == "bad" {
			resp.Error = &guardv1.StreamError{Code: int32(codes.InvalidArgument), Message: "bad frame"}
		} else {
			resp.Response = &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}, DecisionId: f.GetRequest().GetRequestId()}
		}
		if err := st.Send(resp); err != nil {
			return err
		}
	}
}

func serve(t *testing.T, g guardv1.GuardServer) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	guardv1.RegisterGuardServer(srv, g)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func client(t *testing.T, addr string) *Client {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := New(guardv1.NewGuardClient(conn), nil)
	c.MinBackoff, c.MaxBackoff = time.Millisecond, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go c.Run(ctx)
	return c
}

func TestManyInFlightSurviveAReconnect(t *testing.T) {
	g := &flakyGuard{seen: map[string]int{}}
	c := client(t, serve(t, g))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("req-%d", i)
			resp, err := c.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", RequestId: id})
			if err != nil {
				errs <- err
				return
			}
			if resp.GetDecisionId() != id { // answers matched by correlation id
				errs <- fmt.Errorf("request %s got answer %s", id, resp.GetDecisionId())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if g.streams.Load() < 2 {
		t.Fatal("the stream never broke; test proves nothing")
	}
	if _, err := c.Decide(ctx, &guardv1.DecideRequest{RequestId: "bad"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("per-frame error: %v", err)
	}
}

func TestUnreachableServerFailsAfterTheWait(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens
	c := client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Decide(ctx, &guardv1.DecideRequest{RequestId: "x"})
	if err == nil || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Fatal("gave up before the wait bound")
	}
}
