package guard

import (
	"context"
	"errors"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// errNotInTx: what DecideTx is not for (a card, a dry run, a request id),
// which needs a transaction of its own or the batcher.
var errNotInTx = errors.New("guard: DecideTx decides without a card, a dry run or a request id")

// DecideTx decides req live in the caller's transaction tx: the facts are
// read, the log row written and a grant consumed there, so what the caller
// then writes in tx is judged on the same facts and the caller's commit is
// the decision's — no ALLOW is answered before its row is durable, since
// nothing is answered before the commit. Registry.ApplyAction's replay of
// an approved hold uses it: decided, consumed and applied at once, the
// baseline evaluated once.
//
// after counts the decision and tells who must know (observe); call it
// once tx committed. Errors are DecideTx's callers' to roll back on:
// ErrActorNotOwned for a session the runner does not host, ErrUnavailable
// when the guard could not decide (nothing was decided; tx may be aborted).
func (e *Engine) DecideTx(ctx context.Context, tx store.Querier, req *Request) (resp *guardv1.DecideResponse, after func(), err error) {
	if req.Card != nil || req.DryRun || req.RequestID != "" {
		return nil, nil, errNotInTx
	}
	p := e.plan(req)
	p.direct = true
	r, err := liveSource{batched: tx, direct: tx, nonCatalog: &e.nonCatalog}.read(ctx, p)
	v := judge(p, r, err)
	a, err := e.writeTx(ctx, tx, p, r, v)
	switch {
	case err == nil:
		return a.resp, func() { e.observe(ctx, p, a) }, nil
	case errors.Is(err, ErrActorNotOwned):
		return nil, nil, err
	case ctx.Err() != nil:
		return nil, nil, ctx.Err()
	}
	e.log.Warn("the guard could not decide in the caller's transaction; it is retryable", "action", req.Action, "grant", req.Grant, "err", err)
	return nil, nil, unavailable(err)
}

// writeTx is write in tx: the log row (and a grant's consumption) goes out
// through it, never through the batcher.
func (e *Engine) writeTx(ctx context.Context, tx store.Querier, p *plan, r *reading, v verdict) (answered, error) {
	if v.cause != nil {
		return answered{}, v.cause
	}
	switch v.step {
	case stepCited:
		return e.write(ctx, p, r, v) // the consuming decision's answer: nothing is written
	case stepNotOwned:
		return answered{}, notOwned(p.req)
	case stepConsume:
		return e.consumeGrant(ctx, tx, p, v)
	case stepLog:
		a := e.answer(p, v.Decision, v).stored()
		return a, insertTx(ctx, tx, a.row)
	}
	return answered{}, errNotInTx // a prior answer or a hold: no request id, no card here
}
