package inbound

import (
	"context"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
)

// Follower streams hold lifecycle events (approvals.Service.Follow).
type Follower interface {
	Follow(ctx context.Context, after int64, fromNow bool, filter approvals.EventFilter, send func(*guardv1.WatchResponse) error) error
}

// FollowRejections carries out rejected channel registrations as their
// resolved events arrive (approved holds come through the approvals
// service's OnApproved handlers instead, on the resolving replica). Every
// replica follows; carrying out a rejection is idempotent, and one missed
// while no replica followed is carried out by the chat's next message.
func (s *Service) FollowRejections(ctx context.Context, f Follower) error {
	filter := func(_ context.Context, ev *guardv1.WatchResponse) (bool, error) {
		return ev.GetType() == guardv1.EventType_EVENT_TYPE_RESOLVED &&
			ev.GetOutcome() == guardv1.Outcome_OUTCOME_REJECT &&
			ev.GetHold().GetKind() == approvals.KindChannelRegistration, nil
	}
	var cursor int64
	fromNow := true
	for {
		err := f.Follow(ctx, cursor, fromNow, filter, func(ev *guardv1.WatchResponse) error {
			cursor, fromNow = ev.GetCursor(), false
			if err := s.HoldResolved(ctx, ev.GetHold(), ev.GetOutcome()); err != nil {
				s.log.ErrorContext(ctx, "carrying out a rejected registration failed", "hold", ev.GetHold().GetId(), "err", err)
			}
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		s.log.WarnContext(ctx, "registration event stream ended; resuming", "cursor", cursor, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
