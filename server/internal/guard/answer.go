package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// afterTx maps the outcome of a transactional decision.
func (e *Engine) afterTx(ctx context.Context, req *Request, d Decision, resp *guardv1.DecideResponse,
	row *logRow, err error) (*guardv1.DecideResponse, error) {
	switch {
	case err == nil:
		e.count(req, d.Effect, answeredIn(row))
		if resp.HoldCreated {
			// Audit, after the commit: who asked for what, and who may answer.
			e.log.InfoContext(ctx, "hold requested", "audit", true, "hold", resp.HoldId, "action", req.Action,
				"actor", ActorInWords(req.Actor), "reason", d.Reason, "approver_rule", d.Rule.String(), "undelivered", resp.Undelivered)
		}
		return resp, nil
	case errors.Is(err, errConflict):
		return e.prior(ctx, req)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case retryable(req):
		// The transaction rolled back: the grant is unconsumed.
		e.log.Warn("guard transaction failed; the replay is retryable", "action", req.Action, "grant", req.Grant, "err", err)
		return nil, unavailable(err)
	}
	e.log.Error("guard transaction failed; failing closed", "action", req.Action, "err", err)
	fresh := &guardv1.DecideResponse{DecisionId: store.NewOrderedID("dec_", time.Now())}
	return e.finish(ctx, req, failClosed(), fresh,
		&logRow{ID: fresh.DecisionId, Action: req.Action, RunnerID: req.RunnerID, DryRun: req.DryRun}, time.Now())
}

// answeredIn is how long the decision took until now, its log row written:
// the row's latency_us stops where the row was filled.
func answeredIn(row *logRow) time.Duration {
	return time.Duration(row.LatencyUS)*time.Microsecond + time.Since(row.At)
}

// finish logs the decision (batched) and answers. A log failure turns an
// allow into a deny: an unlogged allow could never be cited.
func (e *Engine) finish(ctx context.Context, req *Request, d Decision, resp *guardv1.DecideResponse,
	row *logRow, start time.Time) (*guardv1.DecideResponse, error) {
	e.fill(req, d, resp, row, start)
	err := e.pipe.write(ctx, row)
	switch {
	case err == nil:
	case errors.Is(err, errStale):
		return nil, err // decideFromSnapshot decides again, live
	case errors.Is(err, errConflict):
		return e.prior(ctx, req)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, err
	case retryable(req):
		// Unlogged, so undecided: even a deny is asked again (and logged then).
		e.log.Warn("decision log refused a replay's decision; retryable", "action", req.Action, "grant", req.Grant, "err", err)
		return nil, unavailable(err)
	case d.Effect == EffectAllow:
		d = failClosed()
		e.fill(req, d, resp, row, start)
	}
	e.count(req, d.Effect, answeredIn(row))
	e.relaxed(ctx, req, d, resp)
	return resp, nil
}

// relaxed reports a decision a gate's audit or warn mode let through:
// counted by mode and would-be effect, and in warn mode handed to Warn
// (the agent and the group's admins are told). Dry runs only answer.
func (e *Engine) relaxed(ctx context.Context, req *Request, d Decision, resp *guardv1.DecideResponse) {
	if d.Would == nil || req.DryRun {
		return
	}
	if e.observeMode != nil {
		e.observeMode(e.metricAction(req.Action), d.Mode, string(d.Would.Effect))
	}
	if d.Mode == ModeWarn && d.Effect == EffectAllow && e.warn != nil {
		e.warn(context.WithoutCancel(ctx), Warning{Request: req, Decision: d, DecisionID: resp.GetDecisionId()})
	}
}

// Warning is a decision a warn-mode gate let through.
type Warning struct {
	Request    *Request
	Decision   Decision
	DecisionID string
}

// fill writes the decision into the answer and the log row.
func (e *Engine) fill(req *Request, d Decision, resp *guardv1.DecideResponse, row *logRow, start time.Time) {
	resp.Decision = &guardv1.Decision{Effect: effectProto(d.Effect), Reason: d.Reason, DecidedBy: d.DecidedBy}
	if d.Effect == EffectHold {
		resp.Decision.ApproverRule, resp.Decision.ApproverScope = d.Rule, d.Scope
	}
	row.Mode, row.WouldEffect, row.WouldReason = "", "", ""
	if d.Would != nil {
		resp.Decision.Mode, resp.Decision.WouldEffect, resp.Decision.WouldReason = d.Mode, effectProto(d.Would.Effect), d.Would.Reason
		row.Mode, row.WouldEffect, row.WouldReason = d.Mode, string(d.Would.Effect), d.Would.Reason
	}
	row.At = time.Now()
	row.Effect, row.Reason, row.DecidedBy, row.Grant = string(d.Effect), d.Reason, d.DecidedBy, req.Grant
	if d.Effect == EffectAllow && (d.DecidedBy != ByGrant || req.DryRun) {
		// An ALLOW records a grant only when it consumed it: a self-send
		// naming a pending hold must not carry that hold to ApplyAction.
		row.Grant = ""
	}
	row.Actor, row.ActorKind = storedActor(req.Actor), ActorKind(req.Actor)
	if row.ActorKind == "" {
		row.ActorKind = "system"
	}
	if a := req.Actor.GetAgent(); a != nil {
		row.Group, row.Session = nonEmpty(a.GetAgentGroupId()), nonEmpty(a.GetSessionId())
	}
	row.LatencyUS = time.Since(start).Microseconds()
	row.Answer = nil
	if req.RequestID != "" {
		row.Answer, _ = proto.Marshal(resp)
	}
}

// prior is the answer stored for an earlier request with the same runner
// and request id: a retried request gets the answer it was first given.
func (e *Engine) prior(ctx context.Context, req *Request) (*guardv1.DecideResponse, error) {
	var b []byte
	err := e.pool.QueryRow(ctx, `SELECT answer FROM decision_requests WHERE runner_id = $1 AND request_id = $2`,
		req.RunnerID, req.RequestID).Scan(&b)
	var prior guardv1.DecideResponse
	if err == nil {
		err = proto.Unmarshal(b, &prior)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if retryable(req) {
			return nil, unavailable(fmt.Errorf("read prior answer: %w", err))
		}
		e.log.Error("read prior answer", "err", err)
		return &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_DENY,
			Reason: ReasonFailClosed, DecidedBy: ByGuardFailure}}, nil
	}
	return &prior, nil
}
