package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/runner/internal/metrics"
)

// Decider asks the guard (Guard.DecideStream in production).
type Decider interface {
	Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error)
}

// Notifier puts a notice into a session's inbox.
type Notifier interface {
	Notify(sessionID string, n *agentv1.Notice)
	// NotifyOnce gives a notice about one event at most once: a notice with
	// a key the session's inbox already holds or gave is not given again.
	NotifyOnce(sessionID, key string, n *agentv1.Notice)
}

// Engine runs delivery actions through the guard. Nothing reaches a handler
// of a guarded action without an ALLOW; an unreachable guard fails closed.
type Engine struct {
	Registry *Registry
	Decider  Decider
	// Applier has the server apply an authorized run (Registry.ApplyAction).
	Applier  Applier
	Notifier Notifier
	Metrics  *metrics.Metrics // optional
	Log      *slog.Logger
	// DecideWait bounds how long an action waits for the guard (the stream
	// may be reconnecting) before it fails closed. Default 30s.
	DecideWait time.Duration
	// Tracer records a span per action sent and per replay (nil: tracing
	// is off; a replay still carries its hold's trace context to the guard).
	Tracer trace.Tracer

	approvedTold sync.Map // hold id → the agent heard "approved; running it now"
}

func (e *Engine) log() *slog.Logger {
	if e.Log == nil {
		return slog.Default()
	}
	return e.Log
}

// Submit runs one action sent by a session's agent and tells the agent the
// outcome (as a notice, and as the return value for the Send answer).
func (e *Engine) Submit(ctx context.Context, s Session, requestID, name string, payload *structpb.Struct) (out Outcome) {
	if e.Tracer != nil {
		var span trace.Span
		ctx, span = e.Tracer.Start(ctx, "clawguard.runner/Submit", trace.WithAttributes(
			attribute.String("clawguard.delivery_action", name), attribute.String("clawguard.session", s.ID),
			attribute.String("clawguard.request_id", requestID)))
		defer func() { endSpan(span, out) }()
	}
	out = e.submit(ctx, s, requestID, name, payload)
	if !out.Told {
		e.notify(s, requestID, name, out)
	}
	return out
}

func (e *Engine) submit(ctx context.Context, s Session, requestID, name string, payload *structpb.Struct) Outcome {
	a, ok := e.Registry.Get(name)
	if !ok {
		return Failed("unknown action %q", name)
	}
	if payload == nil {
		payload = &structpb.Struct{}
	}
	if err := e.Registry.Validate(s, name, payload); err != nil {
		return Failed("%v", err)
	}
	var resource map[string]string
	if a.Resource != nil {
		resource = a.Resource(s, payload)
	}
	if a.CatalogAction == "" {
		// Exempt (cli_request): its inner command is guarded by the server.
		return a.Run(ctx, Call{Session: s, Payload: payload, Resource: resource})
	}

	fp := fingerprint(requestID, name, payload)
	req := &guardv1.DecideRequest{
		Action:    a.CatalogAction,
		Actor:     agentActor(s),
		Resource:  resource,
		Payload:   payload,
		RequestId: s.ID + ":" + fp,
		Card:      e.card(a, s, fp, payload),
	}
	resp, err := e.decide(ctx, req)
	if err != nil {
		e.count(name, "error")
		e.log().Warn("delivery action failed closed: no guard answer", "action", name, "session", s.ID, "err", err)
		return Failed("%s not run: %s; nothing was changed", name, refusal(err))
	}
	switch eff := resp.GetDecision().GetEffect(); eff {
	case guardv1.Effect_EFFECT_ALLOW:
		e.count(name, "allow")
		return e.run(ctx, a, Call{Session: s, Payload: payload, Resource: resource, DecisionID: resp.GetDecisionId()})
	case guardv1.Effect_EFFECT_HOLD:
		e.count(name, "hold")
		if resp.GetHoldId() == "" {
			msg := resp.GetHoldError()
			if msg == "" {
				msg = "no hold could be created"
			}
			return Failed("%s needs approval, but %s", name, msg)
		}
		r := resp.GetDecision().GetReason()
		if resp.GetUndelivered() {
			r += " (no approver DM is known; an approver will see it in ncl approvals list)"
		}
		out := Held(resp.GetHoldId(), r)
		if out.Approvers = resp.GetApprovers(); out.Approvers == "" {
			out.Approvers = Approvers(resp.GetDecision().GetApproverRule())
		}
		return out
	case guardv1.Effect_EFFECT_DENY:
		e.count(name, "deny")
		return Denied(resp.GetDecision().GetReason())
	default:
		e.count(name, "error")
		return Failed("%s not run: the guard gave no effect (%v)", name, eff)
	}
}

// Replay re-runs an approved hold's delivery action with the grant; the
// guard re-checks the baseline live (approve-then-revoke never runs — D3).
func (e *Engine) Replay(ctx context.Context, s Session, r *guardv1.ReplayAction) (out Outcome) {
	// The replay continues the trace of the request that was held, linked
	// to the approval's; untraced here, its decision still carries the
	// hold's context to the guard.
	ctx = telemetry.WithRemoteParent(ctx, r.GetTraceparent())
	if e.Tracer != nil {
		var span trace.Span
		ctx, span = e.Tracer.Start(ctx, "clawguard.runner/Replay", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithLinks(telemetry.Links(r.GetApprovalTraceparent())...), trace.WithAttributes(
				attribute.String("clawguard.delivery_action", r.GetDeliveryAction()), attribute.String("clawguard.session", s.ID),
				attribute.String("clawguard.hold_id", r.GetHoldId())))
		defer func() { endSpan(span, out) }()
	}
	out = e.replay(ctx, s, r)
	if out.HoldID == "" {
		out.HoldID = r.GetHoldId()
	}
	if out.Undecided || out.NotHosted {
		// Not a final answer: the caller tries the replay again (or leaves
		// it to the session's new host).
		return out
	}
	e.approvedTold.Delete(r.GetHoldId())
	if !out.Told {
		// Keyed by the hold and what it says: the same outcome of a hold
		// replayed again (its approval re-made after the database forgot
		// it) is not told twice; a different one (a retry that succeeded) is.
		n := outcomeNotice("", r.GetDeliveryAction(), out)
		e.Notifier.NotifyOnce(s.ID, "replay/"+r.GetHoldId()+"/"+fingerprint(out.Status.String(), n.GetText(), nil), n)
	}
	return out
}

func (e *Engine) replay(ctx context.Context, s Session, r *guardv1.ReplayAction) Outcome {
	name := r.GetDeliveryAction()
	a, ok := e.Registry.Get(name)
	if !ok {
		return Failed("approved %s cannot run: this runner has no such action", name)
	}
	if a.CatalogAction == "" {
		return Failed("approved %s cannot run: the action is not guarded, nothing to replay", name)
	}
	if r.GetCatalogAction() != "" && r.GetCatalogAction() != a.CatalogAction {
		return Failed("approved %s cannot run: hold is for %s, the action maps to %s", name, r.GetCatalogAction(), a.CatalogAction)
	}
	payload := r.GetPayload()
	if payload == nil {
		payload = &structpb.Struct{}
	}
	if err := e.Registry.Validate(s, name, payload); err != nil {
		return Failed("%v", err)
	}
	resource := r.GetResource()
	if a.Resource != nil {
		resource = a.Resource(s, payload) // the same resource the hold was decided on
	}
	c := Call{Session: s, Payload: payload, Resource: resource, Replay: true, HoldID: r.GetHoldId()}
	// One call: the server decides the replay live (D3) and applies what
	// the hold holds, in one transaction.
	res, err := e.apply(ctx, a, c)
	if err != nil {
		e.count(name, "error")
		out := Failed("approved %s not run here: %s", name, refusal(err))
		out.Undecided = unreached(err)
		out.NotHosted = NotHosted(err)
		return out
	}
	switch d := res.GetDecision(); d.GetEffect() {
	case guardv1.Effect_EFFECT_ALLOW:
		e.count(name, "allow")
		// Once per hold: a replay retried after its runner's part failed is
		// the same run, and so is the hold replayed again after the
		// database forgot its approval.
		if _, told := e.approvedTold.LoadOrStore(r.GetHoldId(), true); !told {
			e.Notifier.NotifyOnce(s.ID, "approved/"+r.GetHoldId(), &agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_APPROVED, HoldId: r.GetHoldId(),
				Text: ApprovedText(name, r), At: timestamppb.Now()})
		}
		c.DecisionID, c.Applied = res.GetDecisionId(), res
		return a.Run(ctx, c)
	case guardv1.Effect_EFFECT_DENY:
		e.count(name, "deny")
		out := Denied(d.GetReason())
		// A guard that failed closed did not judge the grant (the database
		// was unreachable or refused the log row): not the final answer.
		out.Undecided = FailedClosed(d.GetReason())
		return out
	default:
		// A grant never produces a second card.
		e.count(name, "error")
		return Failed("approved %s not run: the guard answered %v to the replay", name, d.GetEffect())
	}
}

// run has the server apply an authorized fresh run (unless its part is
// only a replay's) and then runs the runner's part.
func (e *Engine) run(ctx context.Context, a Action, c Call) Outcome {
	if applies(a, c) {
		res, err := e.apply(ctx, a, c)
		if err != nil {
			return notApplied(err, "%s allowed but not applied: %s", a.Name, reason(err))
		}
		c.Applied = res
	}
	return a.Run(ctx, c)
}

// endSpan records an action's outcome on its span and ends it.
func endSpan(span trace.Span, out Outcome) {
	span.SetAttributes(attribute.String("clawguard.outcome", out.Status.String()), attribute.String("clawguard.hold_id", out.HoldID))
	if out.Status == agentv1.SendStatus_SEND_STATUS_FAILED {
		span.SetStatus(otelcodes.Error, out.Reason)
	}
	span.End()
}

func (e *Engine) decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	wait := e.DecideWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := e.Decider.Decide(ctx, req)
	if err == nil && resp.GetDecision() == nil {
		err = errors.New("empty guard answer")
	}
	return resp, err
}

// card is the hold card a HOLD answer makes its hold from. Its payload is
// left out: the hold keeps the decided payload, which the frame carries
// once. fp is the send's fingerprint (DecisionRequestID's).
func (e *Engine) card(a Action, s Session, fp string, payload *structpb.Struct) *guardv1.HoldCard {
	title, question := a.Name, fmt.Sprintf("Agent group %s asks to run %s.", s.GroupID, a.Name)
	if a.Card != nil {
		title, question = a.Card(s, payload)
	}
	return &guardv1.HoldCard{
		Title:          title,
		Question:       question,
		Kind:           a.ApprovalKind,
		DeliveryAction: a.Name,
		// A retried send finds its live hold instead of making a second one.
		DedupKey: a.Name + ":" + s.ID + ":" + fp,
	}
}

func (e *Engine) notify(s Session, requestID, name string, out Outcome) {
	e.Notifier.Notify(s.ID, outcomeNotice(requestID, name, out))
}

func (e *Engine) count(action, effect string) {
	if e.Metrics != nil {
		e.Metrics.DeliveryActionsTotal.WithLabelValues(action, effect).Inc()
	}
}

func agentActor(s Session) *guardv1.Actor {
	return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: s.GroupID, SessionId: s.ID}}}
}

// DecisionRequestID is the guard's idempotency key for a fresh action: the
// same send retried (same session, request id, action and payload) gets the
// same answer; an agent reusing a request id for something else does not.
func DecisionRequestID(s Session, requestID, action string, payload *structpb.Struct) string {
	return s.ID + ":" + fingerprint(requestID, action, payload)
}

func fingerprint(requestID, action string, payload *structpb.Struct) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(payload)
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s|%d:%s|", len(requestID), requestID, len(action), action)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// unreached reports whether a Decide error means no answer came: the
// decide client gave up waiting (fail-closed deadline, runner shutting down)
// or the server was unavailable or asked to be tried again.
func unreached(err error) bool {
	return Transient(err)
}

// Transient reports whether an error from the server means "not done, try
// again": a deadline, a cancelled call, or a status that says so.
func Transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
		return true
	}
	return false
}

// NotHosted reports whether the server refused because the session is not
// (any more) placed on this runner: it moved, and its new host acts for
// it. Other refusals with the same code (a payload that differs from the
// approved one, a destination the group lacks) are final answers.
func NotHosted(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.PermissionDenied {
		return false
	}
	m := st.Message()
	return strings.Contains(m, "does not host session") || strings.Contains(m, "is not hosted by runner")
}

// reasonFailClosed is the guard's reason for a DENY it gave because it could
// not decide (server/internal/guard ReasonFailClosed).
const reasonFailClosed = "guard failure (failing closed)"

// FailedClosed reports whether a DENY's reason says the guard failed closed
// rather than judged the request.
func FailedClosed(reason string) bool {
	return strings.HasPrefix(reason, reasonFailClosed)
}

func reason(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

// refusal says why the guard gave no answer, as what it was: a guard that
// could not be reached (or asked to be tried again) is not a guard that
// refused to hear this runner for a session it no longer hosts, nor one
// that found the request malformed.
func refusal(err error) string {
	switch {
	case unreached(err):
		return fmt.Sprintf("the guard could not be reached (%s); try again later", reason(err))
	case NotHosted(err):
		return fmt.Sprintf("this runner no longer hosts the session, so the guard would not decide for it here (%s)", reason(err))
	case status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.InvalidArgument ||
		status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.NotFound:
		return fmt.Sprintf("the guard refused the request (%s)", reason(err))
	default:
		return fmt.Sprintf("the guard gave no decision (%s)", reason(err))
	}
}
