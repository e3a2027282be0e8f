package guardtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/admission"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Past the admission limit a decision is refused at once — ResourceExhausted
// with a retry hint, on Decide and per frame on DecideStream — and nothing
// is decided or logged; once a slot frees, decisions are answered again.
func TestDecisionsPastTheAdmissionLimitAreShedNotDecided(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := newWorld(t, srv)
	full := admission.New(admission.Options{Initial: 8, Min: 8, Max: 8})
	for full.Acquire() {
	}
	srv.GuardAPI().SetAdmission(full)
	before := testutil.ToFloat64(srv.Deps().Metrics.DecisionsShedTotal)
	admittedBefore := sampleCount(t, srv.Deps().Metrics.AdmittedSeconds)
	req := &guardv1.DecideRequest{Action: "agents.create", Actor: w.actor("agent:{A}:{SA}"), Payload: w.payload(map[string]any{"name": "x"})}

	_, err := op.Guard.Decide(ctx, req)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("Decide at the limit: %v, want ResourceExhausted", err)
	}
	hinted := false
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			hinted = true
		}
	}
	if !hinted {
		t.Fatal("the refusal carries no retry hint")
	}
	// The refusal is made where the transport reads the call's headers,
	// before authentication and validation spend anything on it: a call
	// with no token at all is refused the same way.
	anon := testserver.ClientsFor(srv.Conn(t, "", ""))
	if _, err := anon.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "Not An Action"}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an unauthenticated, invalid Decide at the limit: %v, want ResourceExhausted (refused before auth)", err)
	}
	if _, err := anon.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send"}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%v", err)
	}
	before += 2

	stream, err := op.Guard.DecideStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&guardv1.DecideStreamRequest{CorrelationId: "c1", Request: req}); err != nil {
		t.Fatal(err)
	}
	frame, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if e := frame.GetError(); codes.Code(e.GetCode()) != codes.ResourceExhausted || e.GetRetryAfter().AsDuration() <= 0 {
		t.Fatalf("stream frame at the limit: %v, want ResourceExhausted with retry_after", frame)
	}
	// A frame is refused as the stream reads it, before validation: an
	// invalid request at the limit is refused the same way. One whose
	// correlation id could not carry the answer is told so instead.
	if err := stream.Send(&guardv1.DecideStreamRequest{CorrelationId: "c1-invalid", Request: &guardv1.DecideRequest{Action: "Not An Action"}}); err != nil {
		t.Fatal(err)
	}
	if frame, err = stream.Recv(); err != nil || frame.GetCorrelationId() != "c1-invalid" || codes.Code(frame.GetError().GetCode()) != codes.ResourceExhausted {
		t.Fatalf("an invalid frame at the limit: %v %v, want ResourceExhausted (refused before validation)", frame, err)
	}
	if err := stream.Send(&guardv1.DecideStreamRequest{Request: req}); err != nil {
		t.Fatal(err)
	}
	if frame, err = stream.Recv(); err != nil || codes.Code(frame.GetError().GetCode()) != codes.InvalidArgument {
		t.Fatalf("a frame without a correlation id at the limit: %v %v, want InvalidArgument", frame, err)
	}
	before++
	if n := w.count(`SELECT count(*) FROM decisions WHERE agent_group_id = '{A}'`); n != 0 {
		t.Fatalf("%d decisions logged for shed requests", n)
	}
	if got := testutil.ToFloat64(srv.Deps().Metrics.DecisionsShedTotal); got != before+2 {
		t.Fatalf("decisions_shed_total = %v, want %v", got, before+2)
	}
	if got := sampleCount(t, srv.Deps().Metrics.AdmittedSeconds); got != admittedBefore {
		t.Fatalf("admitted_seconds counted %d decisions while every one was refused", got-admittedBefore)
	}

	// A replay (a grant) may use the reserve above the limit: it is the
	// last step of an approval a human is waiting on. A forged grant gets
	// that far and is then decided like any other.
	replay := &guardv1.DecideRequest{Action: req.GetAction(), Actor: req.GetActor(), Payload: req.GetPayload(), Grant: "hold_forged"}
	if err := stream.Send(&guardv1.DecideStreamRequest{CorrelationId: "c1-replay", Request: replay}); err != nil {
		t.Fatal(err)
	}
	if frame, err = stream.Recv(); err != nil || codes.Code(frame.GetError().GetCode()) == codes.ResourceExhausted || frame.GetResponse().GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("a replay at the limit: %v %v, want it decided (a forged grant: DENY), not refused", frame, err)
	}
	full.Release(0)
	if err := stream.Send(&guardv1.DecideStreamRequest{CorrelationId: "c2", Request: req}); err != nil {
		t.Fatal(err)
	}
	if frame, err = stream.Recv(); err != nil || frame.GetResponse().GetDecision() == nil {
		t.Fatalf("after a slot freed: %v %v, want a decision", frame, err)
	}
	// Both decided frames (the replay and c2) were timed from admission.
	if got := sampleCount(t, srv.Deps().Metrics.AdmittedSeconds); got != admittedBefore+2 {
		t.Fatalf("admitted_seconds counted %d decisions, want 2", got-admittedBefore)
	}
}

func sampleCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
