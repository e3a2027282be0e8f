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
