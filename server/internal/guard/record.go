package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/wake"
)

// answered is a decision as its caller is told it and as it is logged.
type answered struct {
	d    Decision
	resp *guardv1.DecideResponse
	row  *logRow // nil: nothing was logged (a prior answer, a citation)
}

// record carries out a verdict: the write it needs, then the answer. It is
// the one place where a failure to decide becomes an answer: a request id
// decided before gets that answer; a cancelled caller its context's error;
// a replay the guard could not decide ErrUnavailable (nothing was decided,
// the grant is unused); anything else a DENY, "guard failure (failing
// closed)". The durability rules live in the writes: an ALLOW is answered
// only once its log row is committed, and a grant is consumed in the same
// statement as its ALLOW's row.
func (e *Engine) record(ctx context.Context, p *plan, r *reading, v verdict) (*guardv1.DecideResponse, error) {
	a, err := e.write(ctx, p, r, v)
	if errors.Is(err, errConflict) {
		// The request id was decided meanwhile: its stored answer stands.
		a, err = e.prior(ctx, p)
	}
	switch {
	case err == nil:
		e.observe(ctx, p, a)
		return a.resp, nil
	case errors.Is(err, errStale), errors.Is(err, ErrActorNotOwned):
		return nil, err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case p.retryable():
		e.log.Warn("the guard could not decide a replay; it is retryable", "action", p.req.Action, "grant", p.req.Grant, "err", err)
		return nil, unavailable(err)
	}
	e.log.Error("the guard could not decide; failing closed", "action", p.req.Action, "err", err)
	return e.failClosed(ctx, p), nil
}

// write makes the verdict's write.
func (e *Engine) write(ctx context.Context, p *plan, r *reading, v verdict) (answered, error) {
	if v.cause != nil {
		return answered{}, v.cause
	}
	switch v.step {
	case stepPrior:
		return answered{d: v.Decision, resp: v.prior}, nil
	case stepCited:
		e.log.Info("replay of a consumed grant: the consuming decision's answer", "action", p.req.Action, "grant", p.req.Grant, "decision", r.grant.ConsumedBy)
		return answered{d: v.Decision, resp: &guardv1.DecideResponse{DecisionId: r.grant.ConsumedBy, Decision: &guardv1.Decision{
			Effect: guardv1.Effect_EFFECT_ALLOW, Reason: grantReason(p.req.Grant), DecidedBy: ByGrant}}}, nil
	case stepNotOwned:
		return answered{}, notOwned(p.req)
	case stepConsume:
		return e.consumeGrant(ctx, e.pool, p, v)
	case stepHold:
		return e.hold(ctx, p, v)
	}
	a := e.answer(p, v.Decision, v).stored()
	a.row.fence = r.fence
	return a, e.batches.write(ctx, a.row)
}

// answer is d as p's answer and its log row, stamped now.
func (e *Engine) answer(p *plan, d Decision, v verdict) answered {
	req := p.req
	now := time.Now() // the id carries the row's at (store.DecisionKey finds it by both)
	resp := &guardv1.DecideResponse{DecisionId: store.NewOrderedID("dec_", now), Explanation: v.explanation,
		Decision: &guardv1.Decision{Effect: effectProto(d.Effect), Reason: d.Reason, DecidedBy: d.DecidedBy}}
	row := &logRow{ID: resp.DecisionId, Action: req.Action, RunnerID: req.RunnerID, RequestID: req.RequestID,
		DryRun: req.DryRun, Trace: v.trace, At: now,
		Effect: string(d.Effect), Reason: d.Reason, DecidedBy: d.DecidedBy, Grant: req.Grant}
	if d.Effect == EffectHold {
		resp.Decision.ApproverRule, resp.Decision.ApproverScope = d.Rule, d.Scope
	}
	if d.Would != nil {
		resp.Decision.Mode, resp.Decision.WouldEffect, resp.Decision.WouldReason = d.Mode, effectProto(d.Would.Effect), d.Would.Reason
		row.Mode, row.WouldEffect, row.WouldReason = d.Mode, string(d.Would.Effect), d.Would.Reason
	}
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
	row.LatencyUS = time.Since(p.start).Microseconds()
	return answered{d: d, resp: resp, row: row}
}

// stored sets the row's stored answer, which a request id's retries get:
// the last thing done to an answer before its row is written.
func (a answered) stored() answered {
	if a.row.RequestID != "" {
		a.row.Answer, _ = proto.Marshal(a.resp)
	}
	return a
}

// consumeGrant allows a replay: one conditional UPDATE consumes the hold (of N
// concurrent replays, on any replica, exactly one matches it), in the same
// statement as the ALLOW's log row, through q (the pool, or the caller's
// transaction: DecideTx). consumed_by: only this decision's citation
// applies the held payload.
func (e *Engine) consumeGrant(ctx context.Context, q store.Querier, p *plan, v verdict) (answered, error) {
	a := e.answer(p, v.Decision, v).stored()
	if e.consume == nil {
		// No hold can be consumed here: the grant is no use (never an allow).
		a = e.answer(p, Decision{Effect: EffectDeny, Reason: ReasonInvalidGrant, DecidedBy: ByGrant}, v).stored()
		return a, insertTx(ctx, q, a.row)
	}
	won, err := e.consume.consumeAndLog(ctx, q, a.row, p.req.Grant, p.entry.ApprovalAction)
	if err != nil || won {
		return a, err
	}
	// Not consumed (used, revoked, or another replay won): nothing was
	// written, and the DENY is logged on its own.
	a = e.answer(p, Decision{Effect: EffectDeny, Reason: ReasonInvalidGrant, DecidedBy: ByGrant}, v).stored()
	return a, insertTx(ctx, q, a.row)
}

// hold creates the hold of a HOLD with a card in the decision's
// transaction. A hold that cannot be made is still a HOLD (never an
// allow), logged with why.
func (e *Engine) hold(ctx context.Context, p *plan, v verdict) (answered, error) {
	unheld := func(why string) (answered, error) {
		a := e.answer(p, v.Decision, v)
		a.resp.HoldError = why
		return a.stored(), e.batches.write(ctx, a.row)
	}
	if e.holds == nil {
		return unheld("holds cannot be created: the approvals service is not wired")
	}
	hr := holdRequest(p.req, p.Entry(), v.Decision)
	if hr.Kind == "" {
		return unheld("this action has no approval kind; no hold can be created")
	}
	var a answered
	logRow := func(res HoldResult) *logRow {
		d := v.Decision
		if res.NoApprover {
			d = Unheld(d, res.Reason)
		}
		a = e.answer(p, d, v)
		a.resp.HoldId, a.resp.HoldCreated, a.resp.Undelivered, a.resp.Approvers = res.HoldID, res.Created, res.Undelivered, res.Approvers
		if res.NoApprover {
			a.resp.HoldError = res.Reason
		}
		a.row.Hold = res.HoldID
		a = a.stored()
		return a.row
	}
	// A created hold's log row is written before its event, in the
	// event's round trip (BeforeEvent); one deduplicated onto a live hold,
	// or not created, after.
	hr.BeforeEvent = func(_ context.Context, b *pgx.Batch, res HoldResult) error {
		queueInsert(b, logRow(res))
		return nil
	}
	// Keyed: every statement of a hold's creation reads or writes by key.
	// Its event wakes the watchers after the commit, not inside it (wake).
	ctx, woken := wake.With(ctx)
	err := pgx.BeginTxFunc(ctx, e.pool, wake.KeyedTx, func(tx pgx.Tx) error {
		a = answered{}
		if used, err := e.useApproved(ctx, tx, p, v, hr); err != nil || used != nil {
			if used != nil {
				a = *used
			}
			return err
		}
		// A live standing grant that matches exactly answers instead of a
		// new hold: read in this transaction, so a revocation committed
		// before it is seen on every replica. Never for a global-scope hold.
		if e.standing != nil && v.Scope != guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL {
			use, err := e.standing(ctx, tx, hr)
			if err != nil {
				return fmt.Errorf("find standing grant: %w", err)
			}
			if use != nil {
				a = e.answer(p, standingDecision(use), v)
				a.row.Hold = use.ID // the grant the ALLOW used (ApplyAction re-checks it)
				a = a.stored()
				return insertTx(ctx, tx, a.row)
			}
		}
		res, err := e.holds(ctx, tx, hr)
		if err != nil {
			return fmt.Errorf("create hold: %w", err)
		}
		if a.row != nil {
			return nil
		}
		return insertTx(ctx, tx, logRow(res))
	})
	if err == nil {
		woken.Send(ctx, e.pool, e.log)
	}
	if err != nil && !errors.Is(err, errConflict) && ctx.Err() == nil {
		e.log.Error("hold creation failed", "action", p.req.Action, "err", err)
		if store.IsUnavailable(err) {
			return unheld(HoldNotCreatedNow)
		}
		return unheld("the hold could not be created (try again)")
	}
	return a, err
}

// prior is the answer stored for an earlier request with the same runner
// and request id: a retried request gets the answer it was first given.
func (e *Engine) prior(ctx context.Context, p *plan) (answered, error) {
	var b []byte
	err := e.pool.QueryRow(ctx, `SELECT answer FROM decision_requests WHERE runner_id = $1 AND request_id = $2`,
		p.req.RunnerID, p.req.RequestID).Scan(&b)
	if err != nil {
		return answered{}, fmt.Errorf("read prior answer: %w", err)
	}
	var resp guardv1.DecideResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		return answered{}, fmt.Errorf("decode prior answer: %w", err)
	}
	return answered{resp: &resp}, nil
}

// failClosed answers DENY "guard failure (failing closed)" and logs it if
// the log takes it (under a fresh id that claims no request id).
func (e *Engine) failClosed(ctx context.Context, p *plan) *guardv1.DecideResponse {
	a := e.answer(p, failClosed(), verdict{})
	a.row.RequestID = ""
	if err := e.batches.write(ctx, a.row); err != nil {
		e.log.Error("decision log refused a fail-closed deny", "action", p.req.Action, "err", err)
	}
	e.observe(ctx, p, a)
	return a.resp
}

// observe counts an answered decision and tells who must know: the audit
// line of a created hold, the mode counters and warn mode's notice.
func (e *Engine) observe(ctx context.Context, p *plan, a answered) {
	if a.row == nil {
		return // answered before (a prior answer, a citation): counted then
	}
	took := time.Duration(a.row.LatencyUS)*time.Microsecond + time.Since(a.row.At)
	if kind := p.kind(); kind != "" {
		if e.observeQuery != nil {
			e.observeQuery(p.metricAction(), string(a.d.Effect), kind, took)
		}
	} else if e.observeDecision != nil {
		e.observeDecision(p.metricAction(), string(a.d.Effect), took)
	}
	if a.resp.HoldCreated {
		// Audit, after the commit: who asked for what, and who may answer;
		// the card's title says it by name ("research → ops").
		e.log.InfoContext(ctx, "hold requested", "audit", true, "hold", a.resp.HoldId, "title", p.req.Card.GetTitle(), "action", p.req.Action,
			"actor", ActorInWords(p.req.Actor), "reason", a.d.Reason, "approver_rule", a.d.Rule.String(), "undelivered", a.resp.Undelivered)
	}
	if a.d.Would == nil || p.req.DryRun {
		return
	}
	if e.observeMode != nil {
		e.observeMode(p.metricAction(), a.d.Mode, string(a.d.Would.Effect))
	}
	if a.d.Mode == ModeWarn && a.d.Effect == EffectAllow && e.warn != nil {
		e.warn(context.WithoutCancel(ctx), Warning{Request: p.req, Decision: a.d, DecisionID: a.resp.GetDecisionId()})
	}
}

// Warning is a decision a warn-mode gate let through.
type Warning struct {
	Request    *Request
	Decision   Decision
	DecisionID string
}

// useApproved answers a request an approval was left for (an entry marked
// NextRequestUses): the approved hold is consumed in the statement that
// logs the ALLOW, so of two requests only one uses it. nil: none was used.
func (e *Engine) useApproved(ctx context.Context, tx pgx.Tx, p *plan, v verdict, hr HoldRequest) (*answered, error) {
	if e.approved == nil || e.consume == nil || !p.Entry().NextRequestUses || hr.SessionID == "" {
		return nil, nil
	}
	id, by, err := e.approved(ctx, tx, hr)
	if err != nil || id == "" {
		return nil, err
	}
	a := e.answer(p, approvedOnceDecision(id, by), v)
	a.row.Grant = id
	a = a.stored()
	won, err := e.consume.consumeAndLog(ctx, tx, a.row, id, hr.Kind)
	if err != nil || !won {
		return nil, err
	}
	return &a, nil
}
