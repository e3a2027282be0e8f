package approvals

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/server/internal/store"
)

// What a resolution tells the hold's session: the runner's replay of an
// approved delivery action, or a notice of how it ended (words.go words it).

// resolutionPush is what tells the hold's session (if any) how it was
// resolved: the replay of an approved delivery-action hold, or a notice
// (nil: nothing to tell). Its words name who resolved it (words.go).
func resolutionPush(ctx context.Context, q store.Querier, hold *guardv1.Hold, outcome guardv1.Outcome, reason string) (*guardv1.Push, error) {
	if hold.SessionId == "" {
		return nil, nil
	}
	var push *guardv1.Push
	what := hold.Kind
	if hold.Title != "" {
		what = hold.Kind + " (" + hold.Title + ")"
	}
	switch outcome {
	case guardv1.Outcome_OUTCOME_APPROVE:
		switch {
		case hold.DeliveryAction != "":
			return replayPush(ctx, q, hold)
		case nextUseKinds[hold.Kind]:
			// Nothing is replayed: the agent is told to ask again.
			push = &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
				Kind: guardv1.NoticeKind_NOTICE_KIND_APPROVED, HoldId: hold.Id,
				Text: fmt.Sprintf("Your %s request was approved: make it again now to use the approval.", what),
			}}}
		}
	case guardv1.Outcome_OUTCOME_REJECT:
		seen, names, err := toldOf(ctx, q, hold)
		if err != nil {
			return nil, err
		}
		push = &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
			Kind: guardv1.NoticeKind_NOTICE_KIND_REJECTED, Text: holdview.Rejected(seen, names, reason), HoldId: hold.Id,
		}}}
	case guardv1.Outcome_OUTCOME_EXPIRE, guardv1.Outcome_OUTCOME_SWEEP:
		// No answer is a no: the request is denied and will not run.
		push = &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
			Kind: guardv1.NoticeKind_NOTICE_KIND_FAILED, Text: fmt.Sprintf("Your %s request expired without a decision: denied, it will not run.", what), HoldId: hold.Id,
		}}}
	}
	return push, nil
}

// replayPush asks the session's runner to replay an approved delivery action
// with the hold as its grant, telling it who approved what (words.go).
func replayPush(ctx context.Context, q store.Querier, h *guardv1.Hold) (*guardv1.Push, error) {
	seen, names, err := toldOf(ctx, q, h)
	if err != nil {
		return nil, err
	}
	return &guardv1.Push{Body: &guardv1.Push_Replay{Replay: &guardv1.ReplayAction{
		HoldId: h.Id, DeliveryAction: h.DeliveryAction, CatalogAction: h.CatalogAction, Payload: h.Payload,
		Resource: h.Resource, ApprovedBy: holdview.ApprovedBy(seen, names), Summary: holdview.Summary(seen, names),
	}}}, nil
}

// traceReplay stamps a replay push with the hold's trace context (the
// runner's replay continues the trace of the request that was held) and
// the approval's (which the replay links to); the approval's own span links
// to the hold's trace. Nothing for other pushes.
func traceReplay(ctx context.Context, q store.Querier, push *guardv1.Push) error {
	r := push.GetReplay()
	if r == nil {
		return nil
	}
	var held string
	if err := q.QueryRow(ctx, `SELECT trace_parent FROM holds WHERE id = $1`, r.GetHoldId()).Scan(&held); err != nil {
		return fmt.Errorf("read the hold's trace context: %w", err)
	}
	stampReplay(ctx, push, held)
	return nil
}

// stampReplay is traceReplay with the hold's trace context (held) already
// read. Nothing for other pushes.
func stampReplay(ctx context.Context, push *guardv1.Push, held string) {
	r := push.GetReplay()
	if r == nil {
		return
	}
	r.Traceparent, r.ApprovalTraceparent = held, telemetry.Traceparent(ctx)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		for _, l := range telemetry.Links(held) {
			span.AddLink(l)
		}
	}
}
