package approvals

import (
	"context"
	"time"

	"github.com/clawguard/clawguard/server/internal/store"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Await waits until the hold is resolved or timeout passes (0: only the
// call's deadline), returning the hold as it then is and whether it is
// resolved. It listens on the replica's event fan-out, never polls.
func (s *Service) Await(ctx context.Context, id string, timeout time.Duration) (_ *guardv1.Hold, _ bool, err error) {
	defer store.Faulted(&err, "hold")
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		// Subscribe before reading, so a resolution between the two is seen.
		sub, _ := s.hub.subscribe(64)
		h, err := GetHold(ctx, s.pool, id)
		if err != nil {
			sub.close()
			return nil, false, err
		}
		if h.Status != guardv1.HoldStatus_HOLD_STATUS_PENDING {
			sub.close()
			return h, true, nil
		}
		resolved, _ := waitResolved(wctx, sub, id)
		sub.close()
		if resolved != nil {
			return resolved, true, nil
		}
		if wctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			// Our timeout: report the hold as it is now.
			h, err := GetHold(ctx, s.pool, id)
			if err != nil {
				return nil, false, err
			}
			return h, h.Status != guardv1.HoldStatus_HOLD_STATUS_PENDING, nil
		}
		// Dropped as a slow subscriber: subscribe again and re-read.
	}
}

func waitResolved(ctx context.Context, sub *subscription, id string) (*guardv1.Hold, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-sub.C:
			if !ok {
				return nil, sub.Err()
			}
			if ev.Type == guardv1.EventType_EVENT_TYPE_RESOLVED && ev.GetHold().GetId() == id {
				return ev.Hold, nil
			}
		}
	}
}
