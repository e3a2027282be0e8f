package main

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// pairGuard answers DecideStream frames two at a time in reverse order,
// refusing actions named "shed" as the server's admission control does.
type pairGuard struct {
	guardv1.UnimplementedGuardServer
}

func (pairGuard) DecideStream(stream grpc.BidiStreamingServer[guardv1.DecideStreamRequest, guardv1.DecideStreamResponse]) error {
	for {
		a, err := stream.Recv()
		if err != nil {
			return nil
		}
		b, err := stream.Recv()
		if err != nil {
			return nil
		}
		for _, f := range []*guardv1.DecideStreamRequest{b, a} {
			out := &guardv1.DecideStreamResponse{CorrelationId: f.GetCorrelationId()}
			if f.GetRequest().GetAction() == "shed" {
				out.Error = &guardv1.StreamError{Code: int32(codes.ResourceExhausted), Message: "at the limit"}
			} else {
				out.Response = &guardv1.DecideResponse{DecisionId: f.GetRequest().GetAction()}
			}
			if err := stream.Send(out); err != nil {
				return err
			}
		}
	}
}

// Answers that come back out of order reach the call that asked, and a
// refused frame is a ResourceExhausted error, as a unary refusal is.
func TestStreamDeciderMatchesAnswersToCalls(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	guardv1.RegisterGuardServer(srv, pairGuard{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	d, err := newStreamDecider(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	var wg sync.WaitGroup
	for _, action := range []string{"one", "shed", "three", "four"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := d.Decide(context.Background(), &guardv1.DecideRequest{Action: action})
			switch {
			case action == "shed" && status.Code(err) != codes.ResourceExhausted:
				t.Errorf("a refused frame: %v, want ResourceExhausted", err)
			case action != "shed" && (err != nil || resp.GetDecisionId() != action):
				t.Errorf("%s: %v %v, want its own answer", action, resp, err)
			}
		}()
	}
	wg.Wait()
}
