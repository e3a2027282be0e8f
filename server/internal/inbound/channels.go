package inbound

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// ChannelRegistrationDedupKey is the one live registration hold per chat.
func ChannelRegistrationDedupKey(messagingGroupID string) string {
	return approvals.KindChannelRegistration + ":" + messagingGroupID
}

// requestRegistration is the unknown-channel flow (seed channel-approval,
// D4): one pending registration per chat, its card offered to the global
// approver chain (global admins, then owners — never a scoped admin, since
// registering creates wirings and agent groups), with one "connect" option
// per agent group, "new" and "reject". No agent group or no eligible
// approver: no card, no row, the message is dropped.
func (s *Service) requestRegistration(ctx context.Context, mg messagingGroup, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, error) {
	if s.holds == nil {
		return nil, errors.New("channel registration: approvals are not wired")
	}
	var resp *guardv1.RouteInboundResponse
	var dropReason string
	created := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Serialise registrations of one chat (the row may not exist yet).
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('inbound-registration:' || $1))`, mg.ID); err != nil {
			return err
		}
		st, holdID, err := registrationStateTx(ctx, tx, mg.ID)
		if err != nil {
			return err
		}
		switch st {
		case registrationLive:
			resp = outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_REGISTRATION_PENDING, mg.ID, "channel registration already pending")
			resp.HoldId = holdID
			return nil
		case registrationRejected:
			// The reject was not carried out yet (its replica stopped
			// before the event reached it): carry it out now.
			if err := denyChannelTx(ctx, tx, mg.ID); err != nil {
				return err
			}
			dropReason = "channel denied"
			return nil
		}
		groups, err := agentGroupsTx(ctx, tx)
		if err != nil {
			return err
		}
		if len(groups) == 0 {
			dropReason = "unknown channel: no agent group to connect it to"
			return nil
		}
		req, err := registrationRequest(mg, m, groups)
		if err != nil {
			return err
		}
		res, err := s.holds.CreateHoldTx(ctx, tx, req)
		if err != nil {
			return fmt.Errorf("create registration hold: %w", err)
		}
		if res.NoApprover || res.Hold == nil {
			dropReason = "unknown channel: no owner or global admin to approve it"
			if res.Reason != "" {
				dropReason += " (" + res.Reason + ")"
			}
			return nil
		}
		body, err := messageJSON(m)
		if err != nil {
			return err
		}
		if err := resources.RecordPendingRegistrationTx(ctx, tx, mg.ID, res.Hold.GetId(), body, res.Hold.GetDeliveredTo()); err != nil {
			return err
		}
		resp = outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_REGISTRATION_PENDING, mg.ID, "channel registration requested")
		resp.HoldId = res.Hold.GetId()
		created = res.Created
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.registrationAnswer(ctx, mg, m, resp, created, dropReason)
}

// registrationAnswer is what a registration request answers, after its
// commit: the hold asked for (audited when created), or the message
// dropped, and why.
func (s *Service) registrationAnswer(ctx context.Context, mg messagingGroup, m *guardv1.RouteInboundRequest, resp *guardv1.RouteInboundResponse,
	created bool, dropReason string) (*guardv1.RouteInboundResponse, error) {
	if created {
		// Audit, after the commit, like every other hold.
		s.log.InfoContext(ctx, "hold requested", "audit", true, "hold", resp.HoldId, "kind", "channel_registration",
			"messaging_group", mg.ID, "requester", m.GetSenderUserId())
	}
	if dropReason != "" {
		if err := s.recordDropped(ctx, mg.ID, m, dropReason); err != nil {
			return nil, err
		}
		return outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED, mg.ID, dropReason), nil
	}
	return resp, nil
}

// registrationRequest is the registration hold of a message from an
// unknown chat: its card offered to the global approver chain, one option
// per agent group (groups), "new" and "reject".
func registrationRequest(mg messagingGroup, m *guardv1.RouteInboundRequest, groups []agentGroup) (approvals.CreateRequest, error) {
	msg, err := messageMap(m)
	if err != nil {
		return approvals.CreateRequest{}, err
	}
	payload, err := structpb.NewStruct(map[string]any{
		"messaging_group_id": mg.ID,
		"channel_type":       mg.Channel,
		"platform_id":        mg.Platform,
		"sender_user_id":     m.GetSenderUserId(),
		"message":            msg,
	})
	if err != nil {
		return approvals.CreateRequest{}, fmt.Errorf("encode registration payload: %w", err)
	}
	requester := &guardv1.Actor{Kind: &guardv1.Actor_System{System: &guardv1.SystemActor{}}}
	if m.GetSenderUserId() != "" {
		requester = human(m.GetSenderUserId())
	}
	return approvals.CreateRequest{
		Kind:      approvals.KindChannelRegistration,
		Payload:   payload,
		Requester: requester,
		// Anchor-less admins-of-scope: owners and global admins, plus
		// the delivered-to approver (recorded).
		Rule:              &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{}}},
		Scope:             guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
		Title:             "📡 New channel",
		Question:          registrationQuestion(mg, m),
		Options:           registrationOptions(groups),
		DedupKey:          ChannelRegistrationDedupKey(mg.ID),
		OriginChannel:     mg.Channel,
		RecordDeliveredTo: true,
	}, nil
}

type registrationState int

const (
	registrationNone     registrationState = iota // no row, or a stale one (hold expired, swept, approved without effect)
	registrationLive                              // hold pending, or a new agent's name awaited
	registrationRejected                          // hold rejected; the denial is still to be recorded
)

// registrationStateTx locks and classifies the chat's pending registration.
func registrationStateTx(ctx context.Context, tx pgx.Tx, mgID string) (registrationState, string, error) {
	var holdID, awaiting, status string
	err := tx.QueryRow(ctx, `SELECT COALESCE(p.hold_id, ''), p.awaiting_name_from,
			CASE WHEN h.status = 'approved' AND h.choice = 'reject' THEN 'rejected' ELSE COALESCE(h.status, '') END
		FROM pending_channel_registrations p LEFT JOIN holds h ON h.id = p.hold_id
		WHERE p.messaging_group_id = $1 FOR UPDATE OF p`, mgID).Scan(&holdID, &awaiting, &status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return registrationNone, "", nil
	case err != nil:
		return registrationNone, "", fmt.Errorf("read pending registration of %s: %w", mgID, err)
	case status == "pending" || awaiting != "":
		return registrationLive, holdID, nil
	case status == "rejected":
		return registrationRejected, holdID, nil
	}
	return registrationNone, holdID, nil
}

// denyChannelTx remembers the chat as denied and ends its registration.
func denyChannelTx(ctx context.Context, tx pgx.Tx, mgID string) error {
	if err := resources.DenyChatTx(ctx, tx, mgID); err != nil {
		return err
	}
	return endRegistrationTx(ctx, tx, mgID)
}

// endRegistrationTx removes the chat's pending registration and any capture
// armed for it.
func endRegistrationTx(ctx context.Context, tx pgx.Tx, mgID string) error {
	if err := resources.EndPendingRegistrationTx(ctx, tx, mgID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM inbound_name_captures WHERE messaging_group_id = $1`, mgID); err != nil {
		return fmt.Errorf("disarm name captures of %s: %w", mgID, err)
	}
	return nil
}

// armNameCaptureTx makes the approver's next direct message the new agent's
// name. One capture per approver: arming another registration leaves the
// earlier one stale (its chat's next message asks again).
func armNameCaptureTx(ctx context.Context, tx pgx.Tx, mgID, user string) error {
	if err := resources.AwaitNameTx(ctx, tx, mgID, user); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO inbound_name_captures (user_id, messaging_group_id) VALUES ($1, $2)
		ON CONFLICT (user_id) DO UPDATE SET messaging_group_id = EXCLUDED.messaging_group_id, armed_at = now()`, user, mgID); err != nil {
		return fmt.Errorf("arm name capture: %w", err)
	}
	return nil
}

// disarmNameCaptureTx drops the approver's capture (and the registration's
// wait for their name).
func disarmNameCaptureTx(ctx context.Context, tx pgx.Tx, mgID, user string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM inbound_name_captures WHERE user_id = $1`, user); err != nil {
		return fmt.Errorf("disarm name capture: %w", err)
	}
	return resources.StopAwaitingNameTx(ctx, tx, mgID, user)
}

type agentGroup struct{ ID, Name string }

func agentGroupsTx(ctx context.Context, tx pgx.Tx) ([]agentGroup, error) {
	rows, err := tx.Query(ctx, `SELECT id, name FROM agent_groups ORDER BY created_at, name`)
	if err != nil {
		return nil, fmt.Errorf("list agent groups: %w", err)
	}
	groups, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (agentGroup, error) {
		var g agentGroup
		return g, r.Scan(&g.ID, &g.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("list agent groups: %w", err)
	}
	return groups, nil
}

func registrationOptions(groups []agentGroup) []*guardv1.HoldOption {
	opts := make([]*guardv1.HoldOption, 0, len(groups)+2)
	for _, g := range groups {
		opts = append(opts, &guardv1.HoldOption{Label: "Connect to " + g.Name, Value: ChoiceConnectPrefix + g.ID})
	}
	return append(opts,
		&guardv1.HoldOption{Label: "New agent", Value: ChoiceNew},
		&guardv1.HoldOption{Label: "Reject", Value: ChoiceReject})
}

func registrationQuestion(mg messagingGroup, m *guardv1.RouteInboundRequest) string {
	if mg.IsGroup || m.GetIsGroup() {
		return fmt.Sprintf("%s mentioned the bot in %s (%s). Connect this chat to an agent?", displayName(m), chatName(mg), mg.Channel)
	}
	return fmt.Sprintf("%s sent the bot a direct message on %s. Connect this chat to an agent?", displayName(m), mg.Channel)
}

// mayRegister is the channels.register consult with the human actor: every
// click and the name reply pass it (owner / global admin / delivered-to
// approver, and a pending registration must exist). An error (wrapping
// guard.ErrUnavailable) says the guard could not decide: neither yes nor no.
func (s *Service) mayRegister(ctx context.Context, userID, mgID string) (bool, string, error) {
	if userID == "" {
		return false, "channel registration is resolved by a human approver", nil
	}
	payload, _ := structpb.NewStruct(map[string]any{"messaging_group_id": mgID})
	resp := s.decide(ctx, &guardv1.DecideRequest{
		Action:   ActionChannelsRegister,
		Actor:    human(userID),
		Resource: map[string]string{"messaging_group": mgID},
		Payload:  payload,
	})
	if undecided(resp) {
		return false, "", fault.Unavailablef(guard.RetryAfter, guard.ErrUnavailable, "channel registration by %s: the guard could not decide now; nothing was done: retry", userID)
	}
	d := resp.GetDecision()
	return d.GetEffect() == guardv1.Effect_EFFECT_ALLOW, d.GetReason(), nil
}
