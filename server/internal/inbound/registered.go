package inbound

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/store"
)

// A registration decided: the approver's choice carried out (a new agent
// named by their next message, or the chat wired to a group), once, on any
// replica, and the message that asked for it delivered.

// ChannelRegistrationResolved carries out a click on a registration card:
// "connect:<group>" wires the chat to that group, admits the triggering
// sender and routes the original message; "new" arms the capture of the
// approver's next DM as the new agent's name; "reject" (or a reject
// outcome) remembers the chat as denied. Expiry and sweep end nothing here:
// the stale row is replaced by the chat's next message.
func (s *Service) ChannelRegistrationResolved(ctx context.Context, hold *guardv1.Hold, o guardv1.Outcome) error {
	mgID := hold.GetPayload().GetFields()["messaging_group_id"].GetStringValue()
	if mgID == "" {
		return fmt.Errorf("channel_registration hold %s: payload lacks messaging_group_id", hold.GetId())
	}
	choice := hold.GetChoice()
	switch o {
	case guardv1.Outcome_OUTCOME_APPROVE:
	case guardv1.Outcome_OUTCOME_REJECT:
		choice = ChoiceReject
	default:
		return nil
	}
	if choice == "" {
		choice = soleConnectOption(hold)
	}
	// Already carried out (another replica followed the same event) or
	// superseded: nothing to do, and no guard consult to log.
	var current string
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(hold_id, '') FROM pending_channel_registrations WHERE messaging_group_id = $1`, mgID).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && current != hold.GetId()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pending registration of %s: %w", mgID, err)
	}
	resolver := hold.GetResolver()
	ok, why, err := s.mayRegister(ctx, resolver, mgID)
	if err != nil {
		return fmt.Errorf("%w: %w", approvals.ErrRetryLater, err)
	}
	if !ok {
		s.log.WarnContext(ctx, "channel registration click refused by the guard", "hold", hold.GetId(), "resolver", resolver, "reason", why)
		return nil
	}

	var replay []byte
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		p, found, err := resources.LockPendingRegistrationTx(ctx, tx, mgID)
		if err != nil || !found || p.HoldID != hold.GetId() {
			return err // vanished or superseded: nothing to do
		}
		switch {
		case choice == ChoiceReject:
			s.log.InfoContext(ctx, "channel registration rejected", "messaging_group", mgID, "approver", resolver)
			return denyChannelTx(ctx, tx, mgID)
		case choice == ChoiceNew:
			return armNameCaptureTx(ctx, tx, mgID, resolver)
		case strings.HasPrefix(choice, ChoiceConnectPrefix):
			if err := completeRegistrationTx(ctx, tx, p, strings.TrimPrefix(choice, ChoiceConnectPrefix)); err != nil {
				return err
			}
			replay = p.Original
			s.log.InfoContext(ctx, "channel registered", "messaging_group", mgID, "agent_group", strings.TrimPrefix(choice, ChoiceConnectPrefix), "approver", resolver)
			return nil
		}
		s.log.WarnContext(ctx, "channel registration resolved with an unknown choice", "hold", hold.GetId(), "choice", choice)
		return nil
	})
	if err != nil {
		return err
	}
	return s.replayStored(ctx, hold.GetId(), replay)
}

// carryOutMissedApproval carries out an approved registration of the chat
// whose continuation never ran (its replica stopped between the approval
// and the handler), then returns the chat's wirings as they now are.
func (s *Service) carryOutMissedApproval(ctx context.Context, mgID string) ([]string, error) {
	var holdID string
	err := s.pool.QueryRow(ctx, `SELECT h.id FROM pending_channel_registrations p JOIN holds h ON h.id = p.hold_id
		WHERE p.messaging_group_id = $1 AND p.awaiting_name_from = '' AND h.status = 'approved'`, mgID).Scan(&holdID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up approved registration of %s: %w", mgID, err)
	}
	hold, err := approvals.GetHold(ctx, s.pool, holdID)
	if err != nil {
		return nil, fmt.Errorf("read approved registration %s: %w", holdID, err)
	}
	if err := s.ChannelRegistrationResolved(ctx, hold, guardv1.Outcome_OUTCOME_APPROVE); err != nil {
		return nil, err
	}
	return s.wiredGroups(ctx, mgID)
}

// soleConnectOption is the choice an approve without one means: the only
// agent group offered, else none.
func soleConnectOption(hold *guardv1.Hold) string {
	var only string
	for _, o := range hold.GetOptions() {
		if strings.HasPrefix(o.GetValue(), ChoiceConnectPrefix) {
			if only != "" {
				return ""
			}
			only = o.GetValue()
		}
	}
	return only
}

// completeRegistrationTx wires the chat to the group, admits the sender who
// triggered the registration (so the replay is not bounced into sender
// admission) and ends the pending registration.
func completeRegistrationTx(ctx context.Context, tx pgx.Tx, p resources.PendingRegistration, agentGroupID string) error {
	if err := resources.WireTx(ctx, tx, p.MessagingGroupID, agentGroupID); err != nil {
		if store.IsForeignKeyViolation(err) {
			return fmt.Errorf("connect %s: agent group %s does not exist", p.MessagingGroupID, agentGroupID)
		}
		return err
	}
	if m, err := messageFrom(p.Original); err == nil && m.GetSenderUserId() != "" {
		if err := resources.AddKnownMemberTx(ctx, tx, agentGroupID, m.GetSenderUserId()); err != nil {
			return err
		}
	}
	return endRegistrationTx(ctx, tx, p.MessagingGroupID)
}

func (s *Service) replayStored(ctx context.Context, holdID string, stored []byte) error {
	if stored == nil {
		return nil
	}
	m, err := messageFrom(stored)
	if err != nil {
		return fmt.Errorf("hold %s: %w", holdID, err)
	}
	r, err := s.Route(ctx, m)
	if err != nil {
		return fmt.Errorf("hold %s: replay: %w", holdID, err)
	}
	s.log.InfoContext(ctx, "registration message replayed", "hold", holdID, "outcome", r.GetOutcome().String(), "session", r.GetSessionId())
	return nil
}

// captureName handles the approver's reply after "new": a direct message
// from a user with an armed capture. The reply is consumed whatever
// happens; it passes the channels.register guard with the human actor
// first, and a refusal (role revoked, registration vanished) disarms the
// capture and creates nothing. Allowed: the agent group is created, the
// chat wired, the original message routed.
func (s *Service) captureName(ctx context.Context, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, bool, error) {
	sender := m.GetSenderUserId()
	if sender == "" || m.GetIsGroup() {
		return nil, false, nil
	}
	// The reply must come from the approver's DM on that channel when one
	// is known (a message of theirs elsewhere is not a name).
	var mgID string
	err := s.pool.QueryRow(ctx, `SELECT c.messaging_group_id FROM inbound_name_captures c
		WHERE c.user_id = $1
		  AND NOT EXISTS (SELECT 1 FROM user_dms d WHERE d.user_id = $1 AND d.channel_type = $2 AND d.address <> $3)`,
		sender, m.GetChannelType(), m.GetPlatformId()).Scan(&mgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up armed name capture: %w", err)
	}
	consumed := func(reason string) (*guardv1.RouteInboundResponse, bool, error) {
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return disarmNameCaptureTx(ctx, tx, mgID, sender) }); err != nil {
			return nil, false, err
		}
		if err := s.recordDropped(ctx, "", m, reason); err != nil {
			return nil, false, err
		}
		return outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED, mgID, reason), true, nil
	}
	ok, why, err := s.mayRegister(ctx, sender, mgID)
	if err != nil {
		return nil, false, err // not a refusal: the capture stays armed and the bridge sends the reply again
	}
	if !ok {
		s.log.WarnContext(ctx, "agent name reply refused by the guard; capture disarmed", "messaging_group", mgID, "user", sender, "reason", why)
		return consumed("agent name reply refused: " + why)
	}
	name := strings.TrimSpace(m.GetText())
	if name == "" || len(name) > 64 {
		return outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_NAME_CAPTURED, mgID, "agent name must be 1 to 64 characters; reply again"), true, nil
	}

	var replay []byte
	var created agentGroup
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		p, found, err := resources.LockPendingRegistrationTx(ctx, tx, mgID)
		if err != nil || !found || p.AwaitingNameFrom != sender {
			return err // vanished or re-armed meanwhile: create nothing
		}
		// A taken name gets a suffix (the reply below says which): the
		// approver answered in a chat, asking again would only cost a turn.
		if created.ID, created.Name, err = resources.CreateGroupTx(ctx, tx, resources.NewGroup{Name: name}, resources.SuffixTakenName); err != nil {
			return err
		}
		if err := completeRegistrationTx(ctx, tx, p, created.ID); err != nil {
			return err
		}
		replay = p.Original
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if created.ID == "" {
		return consumed("agent name reply: the channel registration is no longer pending")
	}
	s.log.InfoContext(ctx, "channel registered to a new agent", "messaging_group", mgID, "agent_group", created.ID, "name", created.Name, "approver", sender)
	if err := s.replayStored(ctx, "", replay); err != nil {
		s.log.ErrorContext(ctx, "replay after registration failed", "messaging_group", mgID, "err", err)
	}
	r := outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_NAME_CAPTURED, mgID, "created agent "+created.Name)
	return r, true, nil
}
