package click

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// server is a fake Approvals (this test is about the client's retries; the
// server's answers are tested against real Postgres in server/ and e2e/).
type server struct {
	hold    *guardv1.Hold
	answers []error // answer i of Resolve; past the end: resolve
	commits []bool  // whether answer i had committed the click anyway
	calls   int
}

func (s *server) fake() Calls {
	return Calls{
		Resolve: func(_ context.Context, req *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
			i := s.calls
			s.calls++
			if s.hold.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
				return nil, status.Error(codes.FailedPrecondition, "hold already resolved")
			}
			if i < len(s.answers) {
				if i < len(s.commits) && s.commits[i] {
					s.resolve(req)
				}
				return nil, s.answers[i]
			}
			s.resolve(req)
			return &guardv1.ResolveResponse{Hold: s.hold}, nil
		},
		Get: func(context.Context, string) (*guardv1.Hold, error) { return s.hold, nil },
	}
}

func (s *server) resolve(req *guardv1.ResolveRequest) {
	s.hold.Status, s.hold.Resolver, s.hold.Choice = guardv1.HoldStatus_HOLD_STATUS_APPROVED, req.GetAsUser(), req.GetChoice()
}

func unavailable(after time.Duration) error {
	st, _ := status.New(codes.Unavailable, "hold: the database is unavailable; retry").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)})
	return st.Err()
}

func approve() *guardv1.ResolveRequest {
	return &guardv1.ResolveRequest{Id: "h1", Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:dana"}
}

func pending() *guardv1.Hold {
	return &guardv1.Hold{Id: "h1", Status: guardv1.HoldStatus_HOLD_STATUS_PENDING}
}

func TestAnUnavailableClickIsAskedAgainAfterTheHint(t *testing.T) {
	s := &server{hold: pending(), answers: []error{unavailable(300 * time.Millisecond), status.Error(codes.ResourceExhausted, "busy")}}
	var waits []time.Duration
	res, err := Resolve(context.Background(), s.fake(), approve(), Options{Clicker: "telegram:dana",
		OnRetry: func(_ error, d time.Duration) { waits = append(waits, d) }})
	if err != nil || res.Hold.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED || res.Repeated || res.Retries != 2 {
		t.Fatalf("click = %+v, %v; want approved after 2 retries", res, err)
	}
	if len(waits) != 2 || waits[0] < 300*time.Millisecond {
		t.Fatalf("waits %v: the first must honour the server's 300ms hint", waits)
	}
}

func TestAClickWhoseAnswerWasLostIsItsOwnSuccess(t *testing.T) {
	s := &server{hold: pending(), answers: []error{unavailable(10 * time.Millisecond)}, commits: []bool{true}}
	res, err := Resolve(context.Background(), s.fake(), approve(), Options{Clicker: "telegram:dana"})
	if err != nil || !res.Repeated || res.Hold.GetResolver() != "telegram:dana" {
		t.Fatalf("click = %+v, %v; want the earlier attempt's approval, repeated", res, err)
	}
}

func TestWhatRetryingCannotChangeIsReportedAtOnce(t *testing.T) {
	for _, code := range []codes.Code{codes.Internal, codes.PermissionDenied, codes.InvalidArgument, codes.NotFound} {
		s := &server{hold: pending(), answers: []error{status.Error(code, "no")}}
		if _, err := Resolve(context.Background(), s.fake(), approve(), Options{}); status.Code(err) != code || s.calls != 1 {
			t.Fatalf("%v: err %v after %d calls, want it at once", code, err, s.calls)
		}
	}
}

func TestSomeoneElsesResolutionIsNotThisClicks(t *testing.T) {
	// The hold was approved by another approver before this click.
	s := &server{hold: &guardv1.Hold{Id: "h1", Status: guardv1.HoldStatus_HOLD_STATUS_APPROVED, Resolver: "telegram:erin"}}
	if _, err := Resolve(context.Background(), s.fake(), approve(), Options{Clicker: "telegram:dana", Earlier: true}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("err %v, want FailedPrecondition: erin approved it, not dana", err)
	}
	// Pressed twice by the same approver: with Earlier, the second press is the first's success.
	s.hold.Resolver = "telegram:dana"
	if res, err := Resolve(context.Background(), s.fake(), approve(), Options{Clicker: "telegram:dana", Earlier: true}); err != nil || !res.Repeated {
		t.Fatalf("second press = %+v, %v; want repeated", res, err)
	}
	// Without Earlier (ncl run again by hand) it stays the server's refusal.
	if _, err := Resolve(context.Background(), s.fake(), approve(), Options{Clicker: "telegram:dana"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("err %v, want FailedPrecondition", err)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	answers := make([]error, 1000)
	for i := range answers {
		answers[i] = unavailable(100 * time.Millisecond)
	}
	s := &server{hold: pending(), answers: answers}
	_, err := Resolve(context.Background(), s.fake(), approve(), Options{For: 500 * time.Millisecond})
	if status.Code(err) != codes.Unavailable || s.calls > 6 {
		t.Fatalf("err %v after %d calls, want the last Unavailable within the bound", err, s.calls)
	}
}
