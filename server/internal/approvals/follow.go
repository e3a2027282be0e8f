package approvals

import (
	"context"

	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/fault"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// EventFilter selects events for one subscriber (nil: all).
type EventFilter func(ctx context.Context, ev *guardv1.WatchResponse) (bool, error)

// Follow streams events after cursor (or from the current end when fromNow)
// to send, then follows live ones, in cursor order, each once. It returns
// when ctx ends, send fails, or the subscriber was too slow (a
// ResourceExhausted status naming the cursor to resume from).
func (s *Service) Follow(ctx context.Context, after int64, fromNow bool, filter EventFilter, send func(*guardv1.WatchResponse) error) error {
	return s.FollowFrom(ctx, after, fromNow, filter, nil, send)
}

// FollowFrom is Follow with started (may be nil), called once the
// subscription is live with the cursor it starts after.
func (s *Service) FollowFrom(ctx context.Context, after int64, fromNow bool, filter EventFilter, started func(from int64) error, send func(*guardv1.WatchResponse) error) (err error) {
	defer store.Faulted(&err, "hold events")
	// A cursor below the retention watermark would silently skip pruned
	// events: refuse it (0 = "all retained events"; from_now reads nothing).
	var pruned0 int64
	if !fromNow {
		var err error
		if pruned0, err = PrunedThrough(ctx, s.pool); err != nil {
			return err // the API maps it (api.Status)
		}
		if after > 0 && after < pruned0 {
			return CursorPruned(after, pruned0)
		}
	}
	sub, pos := s.hub.subscribe(s.SubscriberQueue)
	defer sub.close()
	c := after
	if fromNow {
		c = pos
	}
	if started != nil {
		if err := started(c); err != nil {
			return err
		}
	}
	deliver := func(ev *guardv1.WatchResponse) error {
		if filter != nil {
			ok, err := filter(ctx, ev)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
		}
		return send(ev)
	}
	// Backfill (c, pos] from the table; the subscription carries the rest.
	if c, err = s.backfill(ctx, c, pos, pruned0, deliver); err != nil {
		return err
	}
	return followLive(ctx, sub, max(c, pos), deliver)
}

// backfill delivers the retained events after c up to pos (the
// subscription's start), and says the cursor it reached.
func (s *Service) backfill(ctx context.Context, c, pos, pruned0 int64, deliver func(*guardv1.WatchResponse) error) (int64, error) {
	for c < pos {
		prev := c
		evs, reached, err := s.readRetained(ctx, c, pruned0)
		if fault.Is(err, fault.OutOfRange) {
			return c, err
		}
		if err != nil {
			return c, err // the API maps it (api.Status)
		}
		for _, ev := range evs {
			if ev.Cursor > pos {
				break
			}
			if err := deliver(ev); err != nil {
				return c, err
			}
			c = ev.Cursor
		}
		// Past the tombstones the read ended on, never past pos: what
		// follows it comes through the subscription.
		c = max(c, min(reached, pos))
		if c == prev {
			break
		}
	}
	return c, nil
}

// followLive delivers the subscription's events after c until ctx ends or
// the subscriber falls too far behind (ResourceExhausted: it resumes from
// its cursor).
func followLive(ctx context.Context, sub *subscription, c int64, deliver func(*guardv1.WatchResponse) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-sub.C:
			if !ok {
				return fault.New(fault.Exhausted, "%v (cursor %d)", sub.Err(), c)
			}
			if ev.Cursor <= c {
				continue
			}
			if err := deliver(ev); err != nil {
				return err
			}
			c = ev.Cursor
		}
	}
}

// readRetained reads the events after c, failing with OutOfRange when a
// prune since the Watch began (watermark pruned0) went past c. The
// watermark is read after the events, so a batch pruned between the two
// reads is never silently skipped: the watermark shows it and the events
// are not used. (Old pending holds' events stay below the watermark,
// harmlessly: that is why it must have moved.)
func (s *Service) readRetained(ctx context.Context, c, pruned0 int64) ([]*guardv1.WatchResponse, int64, error) {
	evs, reached, err := readEvents(ctx, s.pool, c, 500)
	if err != nil {
		return nil, c, err
	}
	through, err := PrunedThrough(ctx, s.pool)
	if err != nil {
		return nil, c, err
	}
	if through > pruned0 && through > c {
		return nil, c, CursorPruned(c, through)
	}
	return evs, reached, nil
}
