package inbound

import (
	"context"
	"errors"
	"fmt"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/permissions"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// SenderAdmitDedupKey is the one live sender_admit hold per chat and sender;
// it frees once the hold is resolved, so a rejected sender is asked about
// again on their next message (no deny list).
func SenderAdmitDedupKey(messagingGroupID, senderUserID string) string {
	return permissions.SenderAdmitApprovalAction + ":" + messagingGroupID + ":" + senderUserID
}

var senderAdmitOptions = []*guardv1.HoldOption{
	{Label: "Allow", Value: "approve"},
	{Label: "Deny", Value: "reject"},
}

// admitAndDeliver checks the sender against one wired agent group: known
// users (members, the group's admins, global admins, owners) pass; anyone
// else is the guard's senders.admit decision. Admitted → delivered.
func (s *Service) admitAndDeliver(ctx context.Context, mg messagingGroup, agentGroupID string, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, error) {
	known, err := s.knownSender(ctx, agentGroupID, m.GetSenderUserId())
	if err != nil {
		return nil, err
	}
	if !known && m.GetSenderUserId() != "" {
		if err := s.admitApprovedLate(ctx, mg.ID, agentGroupID, m.GetSenderUserId()); err != nil {
			return nil, err
		}
		if known, err = s.knownSender(ctx, agentGroupID, m.GetSenderUserId()); err != nil {
			return nil, err
		}
	}
	if !known {
		r, admitted, err := s.admitUnknown(ctx, mg, agentGroupID, m)
		if err != nil || !admitted {
			return r, err
		}
	}
	return s.deliver(ctx, mg.ID, agentGroupID, m)
}

// knownSender is the seed's canAccessAgentGroup: a member, an admin of the
// group, a global admin or an owner.
func (s *Service) knownSender(ctx context.Context, agentGroupID, userID string) (bool, error) {
	if userID == "" {
		return false, nil
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM agent_group_members WHERE agent_group_id = $1 AND user_id = $2)
		OR EXISTS (SELECT 1 FROM user_roles WHERE user_id = $2 AND (agent_group_id IS NULL OR agent_group_id = $1))`,
		agentGroupID, userID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check sender %s of %s: %w", userID, agentGroupID, err)
	}
	return ok, nil
}

// admitUnknown asks the guard (senders.admit) about a sender who is not
// known to the group. ALLOW (policy public) admits; HOLD creates the
// sessionless sender_admit hold through the guard's card; DENY drops. A
// held or denied message is recorded as dropped; the hold carries it for
// replay on approval.
func (s *Service) admitUnknown(ctx context.Context, mg messagingGroup, agentGroupID string, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, bool, error) {
	sender := m.GetSenderUserId()
	msg, err := messageMap(m)
	if err != nil {
		return nil, false, err
	}
	payload, err := structpb.NewStruct(map[string]any{
		"messaging_group_id": mg.ID,
		"agent_group_id":     agentGroupID,
		"sender_user_id":     sender,
		"sender_name":        m.GetSenderName(),
		"policy":             mg.Policy,
		"message":            msg,
	})
	if err != nil {
		return nil, false, fmt.Errorf("encode sender_admit payload: %w", err)
	}
	req := &guardv1.DecideRequest{
		Action:   ActionSendersAdmit,
		Actor:    human(sender),
		Resource: map[string]string{"messaging_group": mg.ID, "agent_group": agentGroupID},
		Payload:  payload,
	}
	if sender != "" {
		// Without an identity there is nobody to admit: the guard still
		// decides, but no card is offered.
		req.Card = &guardv1.HoldCard{
			Kind:              permissions.SenderAdmitApprovalAction,
			Title:             "👤 New sender",
			Question:          fmt.Sprintf("%s wants to talk to your agent in %s. Allow?", displayName(m), chatName(mg)),
			Options:           senderAdmitOptions,
			DedupKey:          SenderAdmitDedupKey(mg.ID, sender),
			OriginChannelType: mg.Channel,
			RecordDeliveredTo: true,
			Payload:           payload,
		}
	} else {
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_System{System: &guardv1.SystemActor{}}}
	}
	resp := s.decide(ctx, req)
	if undecided(resp) {
		return nil, false, fault.Unavailablef(guard.RetryAfter, guard.ErrUnavailable, "sender admission of %s: the guard could not decide now; nothing was done: retry", sender)
	}
	d := resp.GetDecision()
	switch d.GetEffect() {
	case guardv1.Effect_EFFECT_ALLOW:
		return nil, true, nil
	case guardv1.Effect_EFFECT_HOLD:
		reason := "unknown sender: approval requested"
		if resp.GetHoldId() == "" {
			reason = "unknown sender: approval could not be requested"
			if resp.GetHoldError() != "" {
				reason += " (" + resp.GetHoldError() + ")"
			}
		}
		if err := s.recordDropped(ctx, mg.ID, m, reason); err != nil {
			return nil, false, err
		}
		if resp.GetHoldId() == "" {
			return outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED, mg.ID, reason), false, nil
		}
		r := outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_HELD, mg.ID, reason)
		r.HoldId = resp.GetHoldId()
		return r, false, nil
	}
	reason := "unknown sender: " + d.GetReason()
	if err := s.recordDropped(ctx, mg.ID, m, reason); err != nil {
		return nil, false, err
	}
	return outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED, mg.ID, reason), false, nil
}

// SenderAdmitApproved is the approve continuation of a sender_admit hold.
// The admission is replayed through the guard with the hold as its grant:
// the baseline is re-checked live (a chat turned strict since admits
// nobody) and the grant is consumed atomically, so the admission is carried
// out once however many times it is attempted. Allowed: the sender becomes a
// member of the wired group and the original message is routed again (it
// now passes as a known sender).
func (s *Service) SenderAdmitApproved(ctx context.Context, hold *guardv1.Hold) error {
	f := hold.GetPayload().GetFields()
	sender := f["sender_user_id"].GetStringValue()
	group := f["agent_group_id"].GetStringValue()
	mg := f["messaging_group_id"].GetStringValue()
	if sender == "" || group == "" || mg == "" {
		return fmt.Errorf("sender_admit hold %s: payload lacks sender, agent group or messaging group", hold.GetId())
	}
	resp := s.decide(ctx, &guardv1.DecideRequest{
		Action:   ActionSendersAdmit,
		Actor:    human(sender),
		Resource: map[string]string{"messaging_group": mg, "agent_group": group},
		Payload:  hold.GetPayload(),
		Grant:    hold.GetId(),
	})
	if undecided(resp) {
		return fmt.Errorf("%w: the admission of %s (hold %s): %w", approvals.ErrRetryLater, sender, hold.GetId(), guard.ErrUnavailable)
	}
	if d := resp.GetDecision(); d.GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		s.log.WarnContext(ctx, "approved sender not admitted", "hold", hold.GetId(), "sender", sender, "reason", d.GetReason())
		return nil
	}
	if err := resources.AddMemberTx(ctx, s.pool, group, sender); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "unknown sender admitted", "sender", sender, "agent_group", group, "approver", hold.GetResolver())
	return s.replay(ctx, hold.GetId(), f["message"])
}

// admitApprovedLate carries out an approved sender_admit hold whose
// continuation never ran (its replica stopped between the approval and the
// handler): the sender's next message finds it by the dedup key (the key
// CreateHoldTx stored: anchored on the wired group, sessionless).
func (s *Service) admitApprovedLate(ctx context.Context, mgID, agentGroupID, sender string) error {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id FROM holds
		WHERE kind = $1 AND dedup_key = $2 AND status = 'approved' AND consumed_at IS NULL
		ORDER BY resolved_at DESC LIMIT 1`, permissions.SenderAdmitApprovalAction,
		approvals.ScopedDedupKey(permissions.SenderAdmitApprovalAction, agentGroupID, "", SenderAdmitDedupKey(mgID, sender))).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up approved admission: %w", err)
	}
	hold, err := approvals.GetHold(ctx, s.pool, id)
	if err != nil {
		return fmt.Errorf("read approved admission %s: %w", id, err)
	}
	return s.SenderAdmitApproved(ctx, hold)
}

// replay routes a message stored in a hold payload again.
func (s *Service) replay(ctx context.Context, holdID string, v *structpb.Value) error {
	if v.GetStructValue() == nil {
		return fmt.Errorf("hold %s: no stored message to replay", holdID)
	}
	b, err := v.GetStructValue().MarshalJSON()
	if err != nil {
		return fmt.Errorf("hold %s: encode stored message: %w", holdID, err)
	}
	m, err := messageFrom(b)
	if err != nil {
		return fmt.Errorf("hold %s: %w", holdID, err)
	}
	r, err := s.Route(ctx, m)
	if err != nil {
		return fmt.Errorf("hold %s: replay: %w", holdID, err)
	}
	s.log.InfoContext(ctx, "held message replayed", "hold", holdID, "outcome", r.GetOutcome().String(), "session", r.GetSessionId())
	return nil
}

func displayName(m *guardv1.RouteInboundRequest) string {
	if m.GetSenderName() != "" {
		return m.GetSenderName()
	}
	if m.GetSenderUserId() != "" {
		return m.GetSenderUserId()
	}
	return "Someone"
}

func chatName(mg messagingGroup) string {
	if mg.Name != "" {
		return mg.Name
	}
	return "a " + mg.Channel + " chat"
}
