package guard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// HoldRequest is what the engine asks the approvals service to create.
type HoldRequest struct {
	Kind          string
	CatalogAction string
	Payload       *structpb.Struct
	Resource      map[string]string // the decided resource; a grant replays only it
	SessionID     string
	AgentGroupID  string
	Requester     *guardv1.Actor
	Rule          *guardv1.ApproverRule
	Scope         guardv1.ApproverScope
	Card          *guardv1.HoldCard
	// Approvals is the quorum the decision's rule asks (0 = one / settings).
	Approvals int
	// BeforeEvent, when set, queues onto b what the transaction still
	// writes before a created hold's requested event: b goes out in the
	// event's round trip, ahead of it (the event lock is held from that
	// write to commit, so the decision's log row goes in before it).
	BeforeEvent func(ctx context.Context, b *pgx.Batch, res HoldResult) error
}

// HoldResult is what the approvals service did.
type HoldResult struct {
	HoldID      string
	Created     bool
	Undelivered bool
	NoApprover  bool
	Reason      string
	// Approvers says who may approve a created hold, by name: what the
	// requester is told (DecideResponse.approvers).
	Approvers string
}

// HoldCreator creates a hold in the decision's transaction (the approvals
// service's CreateHoldTx behind an adapter, so this package stays a leaf).
type HoldCreator func(ctx context.Context, tx pgx.Tx, req HoldRequest) (HoldResult, error)

// HoldNotCreatedNow is a HOLD's HoldError when its hold could not be created
// because the database cannot serve now (store.IsUnavailable): asking again
// later may create it. Other failures say "the hold could not be created".
const HoldNotCreatedNow = "the hold could not be created now: the database is unavailable (try again)"

// NoHoldMade joins a held gate's reason and why its hold could not be made
// in an Unheld decision's reason.
const NoHoldMade = "; no hold was made: "

// Unheld is what a HOLD whose hold cannot be made is: a DENY, logged and
// answered as the agent is told it — the gate's reason, why no hold exists
// and what would fix it (why, from the approvals service). Never a HOLD
// with no hold behind it, which an auditor would take for one pending.
func Unheld(d Decision, why string) Decision {
	return Decision{Effect: EffectDeny, DecidedBy: ByNoApprover, Reason: d.Reason + NoHoldMade + why}
}

// HoldReach says, reading only, why the hold req asks for could not be
// made now ("" when it could): a dry run's answer is the decision's.
type HoldReach func(ctx context.Context, tx pgx.Tx, req HoldRequest) (string, error)

// holdRequest is the hold a HOLD decision d about req asks for.
func holdRequest(req *Request, entry *Entry, d Decision) HoldRequest {
	// The hold kind is the entry's approval action: a caller cannot mint a
	// hold whose approval would be a grant for some other action.
	kind := req.Card.GetKind()
	if entry != nil && entry.ApprovalAction != "" {
		kind = entry.ApprovalAction
	}
	payload := req.Card.GetPayload()
	if payload == nil {
		payload = req.RawPayload
	}
	if payload == nil {
		payload, _ = structpb.NewStruct(req.Payload)
	}
	anchor, _ := req.AgentGroup()
	if g := d.Rule.GetAdminsOfScope().GetAgentGroupId(); g != "" {
		anchor = g
	}
	return HoldRequest{
		Kind: kind, CatalogAction: req.Action, Payload: payload, Resource: req.Resource, SessionID: req.Session(), AgentGroupID: anchor,
		Requester: req.Actor, Rule: d.Rule, Scope: d.Scope, Card: req.Card, Approvals: d.Approvals,
	}
}

// StandingUse is a live standing grant a request that would be held matched.
type StandingUse struct {
	ID, HoldID string
	ApprovedBy []string
	Until      time.Time
}

// StandingFinder looks, in the decision's transaction, for a live standing
// grant matching the hold req would create exactly (the approvals service,
// behind an adapter) and counts its use; nil: none, the hold is created.
type StandingFinder func(ctx context.Context, tx pgx.Tx, req HoldRequest) (*StandingUse, error)

// standingDecision is the ALLOW a standing grant gives: it names who
// approved it and until when.
func standingDecision(u *StandingUse) Decision {
	return Decision{Effect: EffectAllow, DecidedBy: ByStanding,
		Reason: fmt.Sprintf("standing grant %s approved by %s until %s (hold %s)",
			u.ID, strings.Join(u.ApprovedBy, ", "), u.Until.UTC().Format(time.RFC3339), u.HoldID)}
}

// dryRunHold makes a dry run's HOLD what the decision would be: the Unheld
// DENY when its hold could not be made now (read in a read-only
// transaction; a failed read fails closed, as any unread fact does).
func (e *Engine) dryRunHold(ctx context.Context, p *plan, r *reading, v verdict) verdict {
	if !p.req.DryRun || v.Effect != EffectHold || v.cause != nil || e.reach == nil || p.req.Grant != "" {
		return v
	}
	var why string
	err := pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		why, err = e.reach(ctx, tx, holdRequest(p.req, p.Entry(), v.Decision))
		return err
	})
	switch {
	case err != nil:
		return verdict{Decision: failClosed(), cause: fmt.Errorf("check the dry run's hold: %w", err)}
	case why == "":
		return v
	}
	v.Decision = Unheld(v.Decision, why)
	v.explanation = Explain(p.Entry(), &p.req.Input, r.facts, v.Decision)
	return v
}

// ApprovedFinder looks, in the decision's transaction, for an approved and
// unused hold of req's kind, catalog action, session, resource and payload
// whose approvers may still resolve it (the approvals service, behind an
// adapter), locking it; "" when there is none.
type ApprovedFinder func(ctx context.Context, tx pgx.Tx, req HoldRequest) (holdID string, approvedBy []string, err error)

// approvedOnceDecision is the ALLOW a held request's approval gives the
// next identical request.
func approvedOnceDecision(holdID string, approvedBy []string) Decision {
	return Decision{Effect: EffectAllow, DecidedBy: ByGrant,
		Reason: fmt.Sprintf("approved once by %s (hold %s)", strings.Join(approvedBy, ", "), holdID)}
}
