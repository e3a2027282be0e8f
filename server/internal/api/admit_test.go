package api

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/admission"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

var decideInfo = &grpc.UnaryServerInfo{FullMethod: guardv1.Guard_Decide_FullMethodName}

// A Guard.Decide the limiter has no room for is refused by the interceptor
// itself, with a retry hint, and the rest of the chain never runs; an
// admitted one holds its place for the whole call and is not asked for a
// second one by decide.
func TestAdmitUnaryRefusesBeforeTheChainAndHoldsTheSlotForTheCall(t *testing.T) {
	m := metrics.NewMetrics(metrics.NewRegistry())
	l := admission.New(admission.Options{Initial: 1, Min: 1, Max: 1})
	s := NewGuardService(GuardDeps{Metrics: m, Admission: l})

	inside := false
	handler := func(ctx context.Context, _ any) (any, error) {
		inside = true
		if lim, inflight := l.Limit(); inflight != 1 || lim != 1 {
			t.Errorf("inside the call: limit %d, in flight %d; want the call's one slot", lim, inflight)
		}
		if ctx.Value(admittedKey{}) == nil {
			t.Error("the handler's context is not marked admitted: decide would ask the limiter again")
		}
		// The slot is held: a second call is refused while this one runs.
		if _, err := s.AdmitUnary(ctx, nil, decideInfo, func(context.Context, any) (any, error) {
			t.Error("a second call was admitted past a limit of one")
			return nil, nil
		}); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("second call: %v, want ResourceExhausted", err)
		}
		return "ok", nil
	}
	if _, err := s.AdmitUnary(context.Background(), nil, decideInfo, handler); err != nil || !inside {
		t.Fatalf("admitted call: err %v, handler ran %v", err, inside)
	}
	if _, inflight := l.Limit(); inflight != 0 {
		t.Fatalf("%d in flight after the call returned", inflight)
	}
	if got := testutil.ToFloat64(m.DecisionsShedTotal); got != 1 {
		t.Fatalf("decisions_shed_total = %v, want 1", got)
	}

	// Full: refused with a hint, nothing else runs.
	for l.Acquire() {
	}
	_, err := s.AdmitUnary(context.Background(), nil, decideInfo, func(context.Context, any) (any, error) {
		t.Fatal("the chain ran for a refused call")
		return nil, nil
	})
	st := status.Convert(err)
	hinted := false
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			hinted = true
		}
	}
	if st.Code() != codes.ResourceExhausted || !hinted {
		t.Fatalf("at the limit: %v (hint %v), want ResourceExhausted with a retry hint", err, hinted)
	}

	// Other methods, and a server without admission control, pass through.
	other := &grpc.UnaryServerInfo{FullMethod: guardv1.Approvals_Resolve_FullMethodName}
	if _, err := s.AdmitUnary(context.Background(), nil, other, func(context.Context, any) (any, error) { return "ok", nil }); err != nil {
		t.Fatalf("%s refused by admission control: %v", other.FullMethod, err)
	}
	s.SetAdmission(nil)
	if _, err := s.AdmitUnary(context.Background(), nil, decideInfo, func(context.Context, any) (any, error) { return "ok", nil }); err != nil {
		t.Fatalf("admission off: %v", err)
	}
}
