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
	"google.golang.org/protobuf/types/known/durationpb"

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

// sheddingGuard refuses each request's first two frames with the admission
// refusal (ResourceExhausted and a retry hint), then allows it.
type sheddingGuard struct {
	guardv1.UnimplementedGuardServer
	mu   sync.Mutex
	seen map[string]int
}

func (g *sheddingGuard) DecideStream(st grpc.BidiStreamingServer[guardv1.DecideStreamRequest, guardv1.DecideStreamResponse]) error {
	for {
		f, err := st.Recv()
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.seen[f.GetRequest().GetRequestId()]++
		n := g.seen[f.GetRequest().GetRequestId()]
		g.mu.Unlock()
		resp := &guardv1.DecideStreamResponse{CorrelationId: f.GetCorrelationId()}
		if n <= 2 {
			resp.Error = &guardv1.StreamError{Code: int32(codes.ResourceExhausted), Message: "at the limit", RetryAfter: durationpb.New(time.Millisecond)}
		} else {
			resp.Response = &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}, DecisionId: f.GetRequest().GetRequestId()}
		}
		if err := st.Send(resp); err != nil {
			return err
		}
	}
}

// A shed decision is asked again after the hint (never answered as a deny
// or run unchecked); past the caller's deadline it is an error.
func TestShedDecisionsAreAskedAgainAfterTheHint(t *testing.T) {
	g := &sheddingGuard{seen: map[string]int{}}
	c := client(t, serve(t, g))
	var shed atomic.Int32
	c.OnShed = func() { shed.Add(1) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", RequestId: "r1"})
	if err != nil || resp.GetDecisionId() != "r1" {
		t.Fatalf("after two refusals: %v %v, want the ALLOW", resp, err)
	}
	if shed.Load() != 2 {
		t.Fatalf("OnShed called %d times, want 2", shed.Load())
	}
	// A caller whose deadline passes while shed gets the refusal, not an answer.
	g2 := &sheddingGuard{seen: map[string]int{"r2": -1000}}
	c2 := client(t, serve(t, g2))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := c2.Decide(ctx2, &guardv1.DecideRequest{Action: "a2a.send", RequestId: "r2"}); status.Code(err) != codes.ResourceExhausted && status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("shed past the deadline: %v, want ResourceExhausted or DeadlineExceeded", err)
	}
}

func TestShedBackoffDoublesWithJitterAndIsCapped(t *testing.T) {
	for range 50 {
		var w shedWaits
		for attempt, want := range []time.Duration{40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond} {
			if got := w.next(40 * time.Millisecond); got < want*3/4 || got > want*5/4 {
				t.Fatalf("attempt %d: %s, want %s ±25%%", attempt, got, want)
			}
		}
	}
	var w shedWaits
	for range 30 {
		if got := w.next(40 * time.Millisecond); got > 2*time.Second*5/4 {
			t.Fatalf("a long run of refusals waits %s, want at most 2s +25%%", got)
		}
	}
	// A hint above the cap is waited in full.
	if got := w.next(3 * time.Second); got < 3*time.Second*3/4 || got > 3*time.Second*5/4 {
		t.Fatalf("a 3s hint waits %s, want 3s ±25%%", got)
	}
}

// The server's hint adapts: a new one is doubled for the refusals so far.
func TestShedBackoffFollowsANewHint(t *testing.T) {
	for range 50 {
		var w shedWaits
		w.next(40 * time.Millisecond)
		w.next(40 * time.Millisecond)
		want := 400 * time.Millisecond // the third refusal: 100ms doubled twice
		if got := w.next(100 * time.Millisecond); got < want*3/4 || got > want*5/4 {
			t.Fatalf("a new 100ms hint after two refusals waits %s, want %s ±25%%", got, want)
		}
		if got := w.next(100 * time.Millisecond); got < 2*want*3/4 || got > 2*want*5/4 {
			t.Fatalf("then %s, want %s ±25%%", got, 2*want)
		}
	}
}
