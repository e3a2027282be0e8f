package api

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/server/internal/admission"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Limits at the edge.
const (
	maxIDLen = 128
	// StreamInFlight bounds the decisions one DecideStream evaluates at
	// once; when it is reached the server stops reading frames and gRPC
	// flow control pushes back on the runner. It is above admission
	// control's usual limit, so under overload frames are refused at once
	// (ResourceExhausted with a retry hint, per frame) rather than queued
	// unseen in flow-control windows, where the limiter never sees enough
	// in flight to refuse.
	StreamInFlight = 1024
)

// TapOverload is the server's tap (grpc.InTapHandle): while admission
// control is at its limit, a Guard.Decide is refused where the transport
// reads its headers, before a stream, a handler or the interceptors (auth,
// validation, logging) exist. Past the limit refusals are most of what
// arrives, and the cheaper each is, the more CPU is left for the decisions
// admitted: a refusal at the handler cost about what a decision costs.
// AdmitUnary, the first interceptor that matters, refuses what slips past
// between the two checks.
func (s *GuardService) TapOverload(ctx context.Context, info *tap.Info) (context.Context, error) {
	l := s.admission.Load()
	if l == nil || info.FullMethodName != guardv1.Guard_Decide_FullMethodName {
		return ctx, nil
	}
	if l.Saturated() {
		s.d.Metrics.DecisionsShedTotal.Inc()
		return nil, Overloaded(l.RetryAfter())
	}
	return context.WithValue(ctx, arrivedKey{}, time.Now()), nil
}

// AdmitUnary is the interceptor that admits a Guard.Decide ahead of the
// rest of the chain (app puts it before logging, authentication and
// validation). Under overload most calls pass the tap while the limiter
// still has room and find it full once a worker runs them; admitted here,
// a refusal costs none of that chain (validation, authentication and a
// warning line per refusal, most of the server's CPU past the limit). The decision holds its place until the
// handler returns, so the limiter steers by the whole call.
func (s *GuardService) AdmitUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	l := s.admission.Load()
	if l == nil || info.FullMethod != guardv1.Guard_Decide_FullMethodName {
		return handler(ctx, req)
	}
	d, _ := req.(*guardv1.DecideRequest)
	release, err := s.admit(ctx, l, isReplay(d))
	if err != nil {
		return nil, err
	}
	defer release()
	return handler(context.WithValue(ctx, admittedKey{}, true), req)
}

// isReplay: req carries a grant — an approved action's replay, the last
// step of an approval a human is waiting on. Admission gives replays the
// reserve above its limit (admission.Limiter.AcquirePriority); a forged
// grant gets no more than that reserve and is then decided (DENY) live.
func isReplay(req *guardv1.DecideRequest) bool { return req.GetGrant() != "" }

// admit takes a place in l for one decision (a replay may use the reserve
// above the limit), or refuses it (counted, with the retry hint); release
// gives the place back with the decision's latency, from when the
// transport read it (the tap) or else from now.
func (s *GuardService) admit(ctx context.Context, l *admission.Limiter, replay bool) (release func(), err error) {
	admitted := l.Acquire
	if replay {
		admitted = l.AcquirePriority
	}
	if !admitted() {
		s.d.Metrics.DecisionsShedTotal.Inc()
		return nil, Overloaded(l.RetryAfter())
	}
	start, ok := ctx.Value(arrivedKey{}).(time.Time)
	if !ok {
		start = time.Now()
	}
	return func() {
		took := time.Since(start)
		s.d.Metrics.AdmittedSeconds.Observe(took.Seconds())
		s.d.Metrics.AdmissionLimit.Set(float64(l.Release(took)))
	}, nil
}

// admittedKey marks a call AdmitUnary admitted, so decide does not ask the
// limiter a second time.
type admittedKey struct{}

// arrivedKey holds when the transport read a Guard.Decide's headers: the
// limiter steers by the latency from there, so time a call spends queued
// before its handler runs (a saturated server's backlog) counts.
type arrivedKey struct{}

// Decide evaluates one action.
func (s *GuardService) Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	return s.decide(ctx, req)
}

// DecideStream evaluates many actions in flight on one stream. Answers
// carry the frame's correlation id and may arrive out of order; a bad frame
// is answered with a per-frame StreamError and the stream goes on.
func (s *GuardService) DecideStream(stream guardv1.Guard_DecideStreamServer) error {
	ctx := stream.Context()
	sem := make(chan struct{}, StreamInFlight)
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr error
	)
	send := func(r *guardv1.DecideStreamResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(r)
		}
	}
	// Frames are answered by workers that live as long as the stream (a
	// goroutine per frame would grow a fresh stack through the engine's
	// calls every time): an idle worker takes the next frame, and one is
	// started only when none is idle, so there are at most StreamInFlight.
	frames := make(chan *guardv1.DecideStreamRequest)
	worker := func(f *guardv1.DecideStreamRequest) {
		defer wg.Done()
		for ; f != nil; f = <-frames {
			send(s.answerFrame(ctx, f))
			<-sem
		}
	}
	defer func() {
		close(frames) // idle workers receive nil and end
		wg.Wait()
	}()
	for {
		frame, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.refusedAsRead(frame, send) {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		select {
		case frames <- frame:
		default:
			wg.Add(1)
			go worker(frame)
		}
	}
}

// refusedAsRead answers frame with a refusal where the stream reads it
// while admission control is at its limit, before a worker, validation
// and the caller's checks cost anything — as TapOverload does for
// Guard.Decide. Past the limit refusals are most of what arrives, and the
// cheaper each is, the more CPU is left for the decisions admitted. A
// frame with a bad
// correlation id goes the usual way, to be answered InvalidArgument; a
// replay may use the reserve above the limit (isReplay).
func (s *GuardService) refusedAsRead(frame *guardv1.DecideStreamRequest, send func(*guardv1.DecideStreamResponse)) bool {
	l := s.admission.Load()
	if l == nil || !validCorrelationID(frame.GetCorrelationId()) {
		return false
	}
	saturated := l.Saturated
	if isReplay(frame.GetRequest()) {
		saturated = l.SaturatedPriority
	}
	if !saturated() {
		return false
	}
	s.d.Metrics.DecisionsShedTotal.Inc()
	send(&guardv1.DecideStreamResponse{CorrelationId: frame.GetCorrelationId(), Error: streamError(Overloaded(l.RetryAfter()))})
	return true
}

func validCorrelationID(id string) bool { return id != "" && len(id) <= maxIDLen }

// streamError is err as a DecideStream frame's error, with its retry hint.
func streamError(err error) *guardv1.StreamError {
	st := status.Convert(Status(err))
	out := &guardv1.StreamError{Code: int32(st.Code()), Message: st.Message()}
	if d := RetryDelay(st); d > 0 {
		out.RetryAfter = durationpb.New(d)
	}
	return out
}

// answerFrame decides one DecideStream frame; a bad frame is answered
// alone (a per-frame StreamError) and the stream goes on.
func (s *GuardService) answerFrame(ctx context.Context, frame *guardv1.DecideStreamRequest) *guardv1.DecideStreamResponse {
	out := &guardv1.DecideStreamResponse{CorrelationId: frame.GetCorrelationId()}
	var resp *guardv1.DecideResponse
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.d.Log.Error("DecideStream frame panicked", "panic", r)
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		// The stream interceptor skips frames: validated here, a bad
		// one is answered alone and the stream goes on.
		if err := s.d.Validator.Validate(frame); err != nil {
			return edge.Status(err)
		}
		if tp := frame.GetTraceparent(); tp != "" {
			// The stream's context is the stream's: this decision
			// continues the caller's trace, and a hold it creates keeps
			// that context (approvals.CreateHoldTx).
			var end func(*guardv1.DecideResponse, error)
			ctx, end = s.frameSpan(telemetry.WithRemoteParent(ctx, tp), frame.GetRequest())
			defer func() { end(resp, err) }()
		}
		resp, err = s.decide(ctx, frame.GetRequest())
		return err
	}()
	if err != nil {
		out.Error = streamError(err)
	} else {
		out.Response = resp
	}
	return out
}

// frameSpan starts the span of one traced DecideStream frame (no span, and
// ctx as it is, when tracing is off); end records the answer on it.
func (s *GuardService) frameSpan(ctx context.Context, req *guardv1.DecideRequest) (context.Context, func(*guardv1.DecideResponse, error)) {
	if s.d.Tracer == nil {
		return ctx, func(*guardv1.DecideResponse, error) {}
	}
	ctx, span := s.d.Tracer.Start(ctx, "clawguard.guard/Decide", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("clawguard.action", req.GetAction()),
			attribute.String("clawguard.session", req.GetActor().GetAgent().GetSessionId()),
			attribute.String("clawguard.grant", req.GetGrant())))
	return ctx, func(resp *guardv1.DecideResponse, err error) {
		if err != nil {
			span.SetStatus(otelcodes.Error, err.Error())
		} else {
			span.SetAttributes(attribute.String("clawguard.effect", enumword.String(resp.GetDecision().GetEffect())),
				attribute.String("clawguard.decision_id", resp.GetDecisionId()),
				attribute.String("clawguard.hold_id", resp.GetHoldId()))
		}
		span.End()
	}
}

// decide asks the engine for one request: the caller's terms make it the
// engine's request, admission control gives it a place, and what the
// engine says is mapped once (decideError).
func (s *GuardService) decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	if s.d.Engine == nil {
		return nil, status.Error(codes.Unavailable, "the guard is not wired")
	}
	r, err := s.callerRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	if l := s.admission.Load(); l != nil && ctx.Value(admittedKey{}) == nil {
		// A DecideStream frame, or a call served without AdmitUnary.
		release, err := s.admit(ctx, l, r.Grant != "")
		if err != nil {
			return nil, err
		}
		defer release()
	}
	resp, err := s.d.Engine.Decide(ctx, r)
	if err != nil {
		return nil, s.decideError(ctx, r, err)
	}
	return resp, nil
}

// decideError is what the caller is told of an engine error: the engine
// answers a fault already (a runner naming a session it does not host,
// guard.ErrActorNotOwned; a replay the guard could not decide,
// guard.ErrUnavailable), which api.Status maps at the edge like every other,
// or its context's error. Anything else is the server's fault, logged here.
func (s *GuardService) decideError(ctx context.Context, r *guard.Request, err error) error {
	if _, isFault := fault.As(err); !isFault && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		s.d.Log.ErrorContext(ctx, "decide failed", "action", r.Action, "err", err)
	}
	return err
}

// Overloaded refuses a decision past the admission limit: nothing was
// decided, and the caller retries after the hint (the runner does, within
// its deadline, and fails closed past it).
func Overloaded(after time.Duration) error {
	return withRetryHint(codes.ResourceExhausted,
		"the guard is at its limit of decisions in flight; nothing was decided: retry after the hint", after)
}
