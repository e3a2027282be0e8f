package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/proto/egressrule"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// GuardClient is the runner's Decider and Awaiter: net.connect on its
// DecideStream (every connection a decision of its own, with a fresh
// request id), and Approvals.Await for a held one.
type GuardClient struct {
	Decide    func(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error)
	Approvals guardv1.ApprovalsClient
	// Names, when set, names a group for the approver's card ("" when the
	// runner does not know it).
	Names func(groupID string) string
}

// Connect asks the guard about one connection, with the card a hold shows.
func (g *GuardClient) Connect(ctx context.Context, s Session, d Dest) (Verdict, error) {
	dest := egressrule.Destination(d.Host, d.Port)
	res := egressrule.Resource(d.Host, d.Port)
	payload, err := structpb.NewStruct(map[string]any{egressrule.KeyHost: res[egressrule.KeyHost], egressrule.KeyPort: res[egressrule.KeyPort]})
	if err != nil {
		return Verdict{}, err
	}
	req := &guardv1.DecideRequest{
		Action:    egressrule.CatalogAction,
		Actor:     &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: s.GroupID, SessionId: s.ID}}},
		Resource:  res,
		Payload:   payload,
		RequestId: s.ID + ":net-" + randomID(),
		Card:      g.card(s, dest, payload),
	}
	resp, err := g.Decide(ctx, req)
	if err != nil {
		return Verdict{}, err
	}
	dec := resp.GetDecision()
	v := Verdict{Effect: dec.GetEffect(), Reason: dec.GetReason(), DecisionID: resp.GetDecisionId(),
		HoldID: resp.GetHoldId(), HoldError: resp.GetHoldError()}
	if v.Effect == guardv1.Effect_EFFECT_HOLD {
		v.Approvers = delivery.Approvers(dec.GetApproverRule())
	}
	return v, nil
}

// card is what the approver reads: the destination, the group and the
// session, and what each choice allows. Concurrent connections of the
// session to the same destination share one hold (the dedup key).
func (g *GuardClient) card(s Session, dest string, payload *structpb.Struct) *guardv1.HoldCard {
	group := s.GroupID
	if g.Names != nil {
		if n := g.Names(s.GroupID); n != "" {
			group = n + " (" + s.GroupID + ")"
		}
	}
	return &guardv1.HoldCard{
		Title: "Connect to " + dest,
		Question: fmt.Sprintf("An agent of group %s (session %s) asks to open a connection to %s.\n"+
			"Approve once: its next connection to %s goes through. For this session, or for N hours: every "+
			"connection of the session (or of the group's agents) to %s alone, until then. Nothing is replayed: the agent connects again.",
			group, s.ID, dest, dest, dest),
		DedupKey: "net_connect:" + dest,
		Kind:     egressrule.ApprovalKind,
		Payload:  payload,
	}
}

// Await waits for a hold's resolution (Approvals.Await), up to wait.
func (g *GuardClient) Await(ctx context.Context, holdID string, wait time.Duration) (Resolution, error) {
	if wait <= 0 {
		return Resolution{}, nil
	}
	actx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	resp, err := g.Approvals.Await(actx, &guardv1.AwaitRequest{Id: holdID, Timeout: durationpb.New(wait)})
	if err != nil {
		return Resolution{}, err
	}
	h := resp.GetHold()
	r := Resolution{Resolved: resp.GetResolved(), Resolver: h.GetResolver(), Reason: h.GetReason()}
	switch h.GetStatus() {
	case guardv1.HoldStatus_HOLD_STATUS_APPROVED:
		r.Outcome = guardv1.Outcome_OUTCOME_APPROVE
	case guardv1.HoldStatus_HOLD_STATUS_REJECTED:
		r.Outcome = guardv1.Outcome_OUTCOME_REJECT
	case guardv1.HoldStatus_HOLD_STATUS_EXPIRED:
		r.Outcome = guardv1.Outcome_OUTCOME_EXPIRE
	case guardv1.HoldStatus_HOLD_STATUS_SWEPT:
		r.Outcome = guardv1.Outcome_OUTCOME_SWEEP
	default:
		r.Resolved = false
	}
	return r, nil
}

func randomID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
