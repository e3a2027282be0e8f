package modelgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/egress"
)

// verdict is the guard's answer about a call (or a call past the budget).
type verdict struct {
	allowed    bool
	reason     string
	decisionID string
}

// question is one thing the gateway asks the guard: what, and the request
// (built again for every ask: each is a decision of its own).
type question struct {
	what    string // "model call anthropic/claude-opus-4", for the agent
	request func() (*guardv1.DecideRequest, error)
}

// decide asks the guard; a hold waits up to HoldWait for its approval and
// is then asked again (that decision uses the approval, once). Anything
// but an ALLOW is the refusal the agent reads.
func (g *Gateway) decide(ctx context.Context, q question) (verdict, *refusal) {
	resp, rf := g.ask(ctx, q)
	if rf != nil || resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD {
		return allowed(resp), rf
	}
	hold := resp.GetHoldId()
	if hold == "" {
		return verdict{}, &refusal{status: http.StatusForbidden, outcome: "denied",
			text: fmt.Sprintf("%s needs approval, but no hold could be made: %s", q.what, resp.GetHoldError())}
	}
	res, err := g.cfg.Guard.Await(ctx, hold, g.cfg.Limits.HoldWait)
	switch {
	case err != nil || !res.Resolved:
		return verdict{}, g.held(q, resp)
	case res.Outcome == guardv1.Outcome_OUTCOME_APPROVE:
		again, rf := g.ask(ctx, q)
		if rf == nil && again.GetDecision().GetEffect() == guardv1.Effect_EFFECT_HOLD {
			return verdict{}, g.held(q, again)
		}
		return allowed(again), rf
	case res.Outcome == guardv1.Outcome_OUTCOME_REJECT:
		why := ""
		if res.Reason != "" {
			why = fmt.Sprintf(": %q", res.Reason)
		}
		return verdict{}, &refusal{status: http.StatusForbidden, outcome: "denied", holdID: hold,
			text: fmt.Sprintf("%s was rejected by %s (hold %s)%s", q.what, orSomeone(res.Resolver), hold, why)}
	}
	return verdict{}, &refusal{status: http.StatusForbidden, outcome: "denied", holdID: hold,
		text: fmt.Sprintf("%s: hold %s ended without an approval (%s)", q.what, hold, res.Outcome)}
}

func allowed(resp *guardv1.DecideResponse) verdict {
	return verdict{allowed: true, reason: resp.GetDecision().GetReason(), decisionID: resp.GetDecisionId()}
}

// ask is one decision; anything but ALLOW or HOLD is the refusal.
func (g *Gateway) ask(ctx context.Context, q question) (*guardv1.DecideResponse, *refusal) {
	req, err := q.request()
	if err != nil {
		return nil, invalid("%s: %v", q.what, err)
	}
	resp, err := g.cfg.Guard.Decide(ctx, req)
	if err != nil {
		return nil, &refusal{status: http.StatusServiceUnavailable, outcome: "undecided", retry: 2e9,
			text: fmt.Sprintf("%s not made: the guard could not be asked (%v); nothing was sent to the provider, retry", q.what, err)}
	}
	switch resp.GetDecision().GetEffect() {
	case guardv1.Effect_EFFECT_ALLOW, guardv1.Effect_EFFECT_HOLD:
		return resp, nil
	}
	return nil, &refusal{status: http.StatusForbidden, outcome: "denied",
		text: fmt.Sprintf("%s denied: %s", q.what, resp.GetDecision().GetReason())}
}

// held is the answer to a call still held when the wait ended: retryable,
// after a while, naming the hold and who may approve it.
func (g *Gateway) held(q question, resp *guardv1.DecideResponse) *refusal {
	who := ""
	if a := delivery.Approvers(resp.GetDecision().GetApproverRule()); a != "" {
		who = "; " + a + " may approve it"
	}
	return &refusal{status: http.StatusTooManyRequests, outcome: "held", holdID: resp.GetHoldId(), retry: max(g.cfg.Limits.HoldWait/2, time.Second),
		text: fmt.Sprintf("%s is held for approval (hold %s%s): retry once it is approved; the next such call uses the approval",
			q.what, resp.GetHoldId(), who)}
}

func orSomeone(user string) string {
	if user == "" {
		return "an approver"
	}
	return user
}

// groupName is the group as the approver reads it.
func (g *Gateway) groupName(s egress.Session) string {
	if g.cfg.Names != nil {
		if n := g.cfg.Names(s.GroupID); n != "" {
			return n + " (" + s.GroupID + ")"
		}
	}
	return s.GroupID
}

func agentActor(s egress.Session) *guardv1.Actor {
	return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: s.GroupID, SessionId: s.ID}}}
}

func requestID(s egress.Session, what string) string {
	var b [12]byte
	rand.Read(b[:])
	return s.ID + ":" + what + "-" + hex.EncodeToString(b[:])
}

// callQuestion is model.call on {provider, model}. Concurrent calls of a
// session to one model share one hold (the dedup key).
func (g *Gateway) callQuestion(s egress.Session, kind, provider, model string) question {
	call := provider + "/" + model
	if provider == "" {
		call = kind + " model " + model
	}
	return question{what: "model call " + call, request: func() (*guardv1.DecideRequest, error) {
		payload, err := structpb.NewStruct(map[string]any{modelrule.KeyProvider: provider, modelrule.KeyModel: model, modelrule.KeyKind: kind})
		if err != nil {
			return nil, err
		}
		return &guardv1.DecideRequest{
			Action: modelrule.CallAction, Actor: agentActor(s), Payload: payload,
			Resource:  map[string]string{modelrule.KeyProvider: provider, modelrule.KeyModel: model},
			RequestId: requestID(s, "model"),
			Card: &guardv1.HoldCard{
				Title: "Model call " + call,
				Question: fmt.Sprintf("An agent of group %s (session %s) asks to call the model %s.\n"+
					"Approve once: its next call of %s goes through. For this session, or for N hours: every call of %s "+
					"by the session (or by the group's agents), until then. Nothing is replayed: the agent calls again.",
					g.groupName(s), s.ID, call, call, call),
				DedupKey: "model_call:" + call, Kind: modelrule.CallKind, Payload: payload,
			},
		}, nil
	}}
}

// budgetQuestion is model.budget on {budget: period}, asked only when a
// reservation came back over budget: its card says what the group spent,
// on what, and the budget.
func (g *Gateway) budgetQuestion(s egress.Session, call string, worst int64, over *guardv1.ReserveModelUsageResponse) question {
	period := "day"
	if over.GetBudget().GetPeriod() == guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_MONTH {
		period = "month"
	}
	return question{what: fmt.Sprintf("model call %s past the group's %s budget", call, budgetWord(period)), request: func() (*guardv1.DecideRequest, error) {
		payload, err := structpb.NewStruct(map[string]any{modelrule.KeyBudget: period})
		if err != nil {
			return nil, err
		}
		return &guardv1.DecideRequest{
			Action: modelrule.BudgetAction, Actor: agentActor(s), Payload: payload,
			Resource:  map[string]string{modelrule.KeyBudget: period},
			RequestId: requestID(s, "budget"),
			Card: &guardv1.HoldCard{
				Title:    fmt.Sprintf("Past the %s model budget of %s", budgetWord(period), g.groupName(s)),
				Question: budgetCard(g.groupName(s), s.ID, call, worst, over),
				DedupKey: "model_budget:" + period, Kind: modelrule.BudgetKind, Payload: payload,
			},
		}, nil
	}}
}

func budgetWord(period string) string {
	if period == "month" {
		return "monthly"
	}
	return "daily"
}

// budgetCard is what the approver reads about a call past the budget.
func budgetCard(group, session, call string, worst int64, over *guardv1.ReserveModelUsageResponse) string {
	b := over.GetBudget()
	var sb strings.Builder
	fmt.Fprintf(&sb, "Group %s has used its %s model budget (since %s UTC):", group, budgetWord(periodWord(b)),
		b.GetPeriodStart().AsTime().Format("2006-01-02"))
	if b.GetTokens() > 0 {
		fmt.Fprintf(&sb, " %d of %d tokens spent, %d reserved by calls in flight;", b.GetSpentTokens(), b.GetTokens(), b.GetReservedTokens())
	}
	if b.GetCostMicros() > 0 {
		fmt.Fprintf(&sb, " %s of %s spent, %s reserved;", micros(b.GetSpentCostMicros()), micros(b.GetCostMicros()), micros(b.GetReservedCostMicros()))
	}
	if len(over.GetPeriodUsage()) > 0 {
		sb.WriteString("\nOn what:")
		for _, u := range over.GetPeriodUsage() {
			fmt.Fprintf(&sb, "\n  %s/%s: %d calls, %d tokens in, %d out, %d cached, %s", u.GetProvider(), u.GetModel(), u.GetCalls(),
				u.GetInputTokens(), u.GetOutputTokens(), u.GetCacheReadTokens()+u.GetCacheWriteTokens(), micros(u.GetCostMicros()))
		}
	}
	fmt.Fprintf(&sb, "\nAn agent of the group (session %s) asks to call %s, up to %d tokens, past it.\n"+
		"Approve once: this session's next call past the budget goes on. For this session, or for N hours: every call "+
		"of the session (or of the group's agents) past the budget, until then.", session, call, worst)
	return sb.String()
}

func periodWord(b *guardv1.ModelBudget) string {
	if b.GetPeriod() == guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_MONTH {
		return "month"
	}
	return "day"
}

// micros is an amount of micro-units as a person reads it (6 decimals).
func micros(m int64) string { return fmt.Sprintf("%d.%06d", m/1_000_000, m%1_000_000) }
