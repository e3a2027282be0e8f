package inbound

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/authn"
)

// captureReason handles the approver's reply after "Reject with reason…":
// a direct message from a user some pending hold awaits a reason from (the
// newest such capture, unless a new-agent name capture was armed after it).
// The reply is consumed whatever happens. It rejects the hold through
// approvals.Resolve as that user, so mayResolve runs again with live roles:
// a role revoked in between refuses it (D4), the capture is dropped and the
// hold stays pending for the other approvers. An expired or resolved hold
// is no longer pending and its capture is gone with it.
func (s *Service) captureReason(ctx context.Context, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, bool, error) {
	sender := m.GetSenderUserId()
	if s.resolver == nil || sender == "" || m.GetIsGroup() {
		return nil, false, nil
	}
	// The reply must come from the approver's DM on that channel when one
	// is known (a message of theirs elsewhere is not a reason).
	var holdID string
	err := s.pool.QueryRow(ctx, `SELECT h.id FROM holds h
		WHERE h.awaiting_reason_from = $1 AND h.status = 'pending'
		  AND NOT EXISTS (SELECT 1 FROM inbound_name_captures c WHERE c.user_id = $1 AND c.armed_at > h.awaiting_reason_at)
		  AND NOT EXISTS (SELECT 1 FROM user_dms d WHERE d.user_id = $1 AND d.channel_type = $2 AND d.address <> $3)
		ORDER BY h.awaiting_reason_at DESC LIMIT 1`,
		sender, m.GetChannelType(), m.GetPlatformId()).Scan(&holdID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up armed reason capture: %w", err)
	}
	reason := clampReason(strings.TrimSpace(m.GetText()))
	if reason == "" {
		r := outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_REASON_CAPTURED, "", "the reason must not be empty; reply again")
		r.HoldId = holdID
		return r, true, nil
	}
	hold, err := s.resolver.Resolve(ctx, approvals.Resolution{
		HoldID: holdID, Outcome: guardv1.Outcome_OUTCOME_REJECT, Clicker: sender, Reason: reason,
		Channel: authn.Namespace(sender), // typed in the approver's chat
	})
	if err != nil {
		if !fault.Is(err, fault.Denied) && !fault.Is(err, fault.Precondition) && !fault.Is(err, fault.NotFound) {
			return nil, false, err
		}
		s.log.WarnContext(ctx, "reject reason refused; capture dropped", "hold", holdID, "user", sender, "err", err)
		if _, derr := s.resolver.DisarmReasonCapture(ctx, holdID, sender); derr != nil {
			return nil, false, derr
		}
		why := "reject reason refused: " + fault.Message(err)
		if err := s.recordDropped(ctx, "", m, why); err != nil {
			return nil, false, err
		}
		r := outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED, "", why)
		r.HoldId = holdID
		return r, true, nil
	}
	s.log.InfoContext(ctx, "hold rejected with the approver's reason", "hold", hold.GetId(), "approver", sender)
	r := outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_REASON_CAPTURED, "", "rejected with your reason")
	r.HoldId = hold.GetId()
	return r, true, nil
}

// clampReason keeps the first MaxReasonChars characters (the seed clamps
// rather than asking again).
func clampReason(s string) string {
	if utf8.RuneCountInString(s) <= approvals.MaxReasonChars {
		return s
	}
	return string([]rune(s)[:approvals.MaxReasonChars])
}
