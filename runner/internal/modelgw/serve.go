package modelgw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/runner/internal/egress"
)

// serve is one call, in order: the path, the session's token, the body read
// once, the session's provider, the guard's decision, the reservation, and
// the call forwarded with the provider's key, its usage settled at its end.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, s egress.Session) {
	start := time.Now()
	rt, ok := routes[r.URL.Path]
	if !ok {
		g.refuse(w, r, kindOfRequest(r), "", "", start, &refusal{status: http.StatusNotFound, outcome: "invalid",
			text: fmt.Sprintf("%s is not served here: POST /v1/messages, /v1/messages/count_tokens, /v1/chat/completions or /v1/responses", r.URL.Path)})
		return
	}
	if r.Method != http.MethodPost {
		g.refuse(w, r, rt.kind, "", "", start, &refusal{status: http.StatusMethodNotAllowed, outcome: "invalid",
			text: r.Method + " " + r.URL.Path + ": only POST is served"})
		return
	}
	if !g.authorized(s.ID, r) {
		g.refuse(w, r, rt.kind, "", "", start, &refusal{status: http.StatusUnauthorized, outcome: "unauthorized",
			text: "this endpoint takes the session's own token (ANTHROPIC_AUTH_TOKEN, OPENAI_API_KEY), and only while its session runs"})
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.Limits.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			g.refuse(w, r, rt.kind, "", "", start, &refusal{status: http.StatusRequestEntityTooLarge, outcome: "invalid",
				text: fmt.Sprintf("the request body is over %d bytes", g.cfg.Limits.MaxBody)})
			return
		}
		g.refuse(w, r, rt.kind, "", "", start, invalid("the request body could not be read: %v", err))
		return
	}
	c, rf := readCall(rt, raw, g.cfg.Limits)
	if rf != nil {
		g.refuse(w, r, rt.kind, "", "", start, rf)
		return
	}
	g.serveCall(w, r, s, rt, c, start)
}

// serveCall decides, reserves and forwards a call read whole.
func (g *Gateway) serveCall(w http.ResponseWriter, r *http.Request, s egress.Session, rt route, c call, start time.Time) {
	ctx := r.Context()
	pr, err := g.routes.get(ctx, s.ID, rt.kind)
	if err != nil {
		g.refuse(w, r, rt.kind, "", c.model, start, &refusal{status: http.StatusServiceUnavailable, outcome: "undecided", retry: 2e9,
			text: fmt.Sprintf("the session's %s provider could not be read (%v); nothing was sent, retry", rt.kind, err)})
		return
	}
	v, rf := g.decide(ctx, g.callQuestion(s, rt.kind, pr.provider, c.model))
	if rf != nil {
		g.refuse(w, r, rt.kind, pr.provider, c.model, start, rf)
		return
	}
	target, err := upstreamURL(pr.baseURL, rt, r.URL.Query())
	if err != nil {
		g.refuse(w, r, rt.kind, pr.provider, c.model, start, &refusal{status: http.StatusBadGateway, outcome: "failed", text: err.Error()})
		return
	}
	var res *reservation
	if rt.meters() {
		// A group with a budget reserves the worst case before the call
		// leaves; without one nothing is reserved, and the settle records
		// the call from its decision.
		worst := &guardv1.ModelTokens{Input: inputBound(c.body, g.cfg.Limits), Output: c.output}
		res = &reservation{id: v.decisionID, worst: worst}
		if pr.budget {
			if res, rf = g.reserve(ctx, s, pr.provider, c.model, v.decisionID, worst); rf != nil {
				g.refuse(w, r, rt.kind, pr.provider, c.model, start, rf)
				return
			}
		}
	}
	overhead := time.Since(start)
	g.cfg.Metrics.added(pr.provider, overhead)
	outcome := "forwarded"
	g.forward(w, r, forwarding{
		target: target, header: outHeader(r.Header, rt.kind, pr.credential), body: c.body, rt: rt,
		onResponse: func(status int, mb *meteredBody) {
			mb.first = func() { g.cfg.Metrics.firstByte(pr.provider, time.Since(start)) }
			mb.done = func(used modelrule.Tokens, complete bool) {
				if status >= 400 {
					// The provider refused it: nothing was generated or billed.
					used, complete = modelrule.Tokens{}, true
				} else if !complete {
					outcome = "cut"
				}
				g.cfg.Metrics.call(pr.provider, c.model, outcome)
				g.settle(s, res, used, complete)
			}
		},
		onFailure: func(err error) {
			var op *net.OpError
			nothingSent := errors.As(err, &op) && op.Op == "dial"
			g.cfg.Metrics.call(pr.provider, c.model, "failed")
			g.settle(s, res, modelrule.Tokens{}, nothingSent)
		},
	})
}

// reservation is a call's reservation, settled once at its end.
type reservation struct {
	id    string
	worst *guardv1.ModelTokens
}

// reserve reserves the call's worst case. Over the budget it asks
// model.budget (the card says what the group spent, on what, and the
// budget); an ALLOW of it — an approval used once, a standing grant, or a
// mode — reserves past the budget.
func (g *Gateway) reserve(ctx context.Context, s egress.Session, provider, model, decision string, worst *guardv1.ModelTokens) (*reservation, *refusal) {
	req := &guardv1.ReserveModelUsageRequest{SessionId: s.ID, DecisionId: decision, Provider: provider, Model: model, Worst: worst}
	resp, err := g.cfg.Models.ReserveModelUsage(ctx, req)
	if err != nil {
		return nil, unreserved(err)
	}
	if !resp.GetOverBudget() {
		return &reservation{id: resp.GetReservationId(), worst: worst}, nil
	}
	call := provider + "/" + model
	v, rf := g.decide(ctx, g.budgetQuestion(s, call, worst.GetInput()+worst.GetOutput(), resp))
	if rf != nil {
		return nil, rf
	}
	req.OverBudgetDecisionId = v.decisionID
	if resp, err = g.cfg.Models.ReserveModelUsage(ctx, req); err != nil {
		return nil, unreserved(err)
	}
	return &reservation{id: resp.GetReservationId(), worst: worst}, nil
}

func unreserved(err error) *refusal {
	return &refusal{status: http.StatusServiceUnavailable, outcome: "undecided", retry: 2e9,
		text: fmt.Sprintf("the call's budget could not be reserved (%v); nothing was sent to the provider, retry", err)}
}

// settle settles a reservation (nil: the call is not billed) off the
// call's path, retried a few times; one never settled is swept by the
// server to its worst case after an hour.
func (g *Gateway) settle(s egress.Session, res *reservation, used modelrule.Tokens, complete bool) {
	if res == nil {
		return
	}
	req := &guardv1.SettleModelUsageRequest{ReservationId: res.id, Complete: complete, SessionId: s.ID, Worst: res.worst,
		Used: &guardv1.ModelTokens{Input: used.Input, Output: used.Output, CacheRead: used.CacheRead, CacheWrite: used.CacheWrite}}
	go func() {
		var err error
		for attempt := range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = g.cfg.Models.SettleModelUsage(ctx, req)
			cancel()
			if err == nil || !retryable(err) {
				break
			}
			time.Sleep(time.Duration(attempt+1) * time.Second)
		}
		if err != nil {
			g.cfg.Log.Warn("a model call's usage could not be settled (the server settles it to its worst case within the hour)",
				"session", s.ID, "reservation", res.id, "err", err)
		}
	}()
}

// refuse answers a refusal and counts it.
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, kind, provider, model string, start time.Time, rf *refusal) {
	g.cfg.Metrics.call(provider, model, rf.outcome)
	g.cfg.Log.Info("model call refused", "path", r.URL.Path, "provider", provider, "model", model, "outcome", rf.outcome,
		"status", rf.status, "hold", rf.holdID, "reason", rf.text, "took", time.Since(start).String())
	rf.write(w, kind)
}
