package approvals

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/retention"
	"github.com/clawguard/clawguard/server/internal/store"
)

// EventsChannel is the NOTIFY channel hold_events' trigger signals. A
// notification is only a wake-up: readers always re-read the table after
// their last cursor, so nothing is missed or duplicated.
const EventsChannel = "clawguard_hold_events"

// ErrSlowSubscriber ends a subscription whose buffer filled up: it resumes
// from its last cursor instead of holding everyone else back.
var ErrSlowSubscriber = errors.New("subscriber too slow; resume from the last cursor")

// hub fans the events one replica reads out to its subscribers. Each
// subscriber has its own buffer; a full buffer drops that subscriber only.
type hub struct {
	mu   sync.Mutex
	last int64 // highest cursor broadcast
	subs map[*subscription]struct{}
	wake chan struct{}
}

type subscription struct {
	h      *hub
	C      chan *guardv1.WatchResponse
	err    error // set before C is closed
	closed bool
}

func newHub() *hub {
	return &hub{subs: map[*subscription]struct{}{}, wake: make(chan struct{}, 1)}
}

// subscribe registers a subscriber; every event with a cursor above the
// returned position will be sent to it (or it is dropped).
func (h *hub) subscribe(buf int) (*subscription, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &subscription{h: h, C: make(chan *guardv1.WatchResponse, buf)}
	h.subs[s] = struct{}{}
	return s, h.last
}

// close unregisters the subscriber (idempotent).
func (s *subscription) close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.closeLocked(nil)
}

func (s *subscription) closeLocked(err error) {
	if s.closed {
		return
	}
	s.closed = true
	s.err = err
	delete(s.h.subs, s)
	close(s.C)
}

// Err is why the subscription ended (after C is closed).
func (s *subscription) Err() error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.err
}

// broadcast sends events (ascending cursors above h.last) to every
// subscriber without blocking.
func (h *hub) broadcast(evs []*guardv1.WatchResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		if ev.Cursor <= h.last {
			continue
		}
		h.last = ev.Cursor
		for s := range h.subs {
			select {
			case s.C <- ev:
			default:
				s.closeLocked(ErrSlowSubscriber)
			}
		}
	}
}

func (h *hub) position() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// readEvents reads up to limit events after cursor, oldest first.
func readEvents(ctx context.Context, q store.Querier, after int64, limit int) ([]*guardv1.WatchResponse, error) {
	rows, err := q.Query(ctx, `SELECT cursor, type, COALESCE(outcome, ''), resolver, undelivered, hold, created_at, approvals_remaining
		FROM hold_events WHERE cursor > $1 ORDER BY cursor LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read hold events: %w", err)
	}
	defer rows.Close()
	var out []*guardv1.WatchResponse
	for rows.Next() {
		var (
			ev           guardv1.WatchResponse
			typ, outcome string
			body         []byte
			at           time.Time
		)
		if err := rows.Scan(&ev.Cursor, &typ, &outcome, &ev.Resolver, &ev.Undelivered, &body, &at, &ev.ApprovalsRemaining); err != nil {
			return nil, fmt.Errorf("read hold events: %w", err)
		}
		ev.Hold = &guardv1.Hold{}
		if err := protojson.Unmarshal(body, ev.Hold); err != nil {
			return nil, fmt.Errorf("hold event %d: %w", ev.Cursor, err)
		}
		switch typ {
		case "resolved":
			ev.Type = guardv1.EventType_EVENT_TYPE_RESOLVED
		case "approved_partial":
			ev.Type = guardv1.EventType_EVENT_TYPE_APPROVED_PARTIAL
		case "warned":
			ev.Type = guardv1.EventType_EVENT_TYPE_WARNED
		default:
			ev.Type = guardv1.EventType_EVENT_TYPE_REQUESTED
		}
		ev.Outcome = outcomeFromString(outcome)
		ev.At = timestamppb.New(at)
		out = append(out, &ev)
	}
	return out, rows.Err()
}

// LatestCursor is the newest event's cursor (0 when none).
func LatestCursor(ctx context.Context, q store.Querier) (int64, error) {
	var c int64
	if err := q.QueryRow(ctx, `SELECT COALESCE(max(cursor), 0) FROM hold_events`).Scan(&c); err != nil {
		return 0, fmt.Errorf("latest hold event: %w", err)
	}
	return c, nil
}

// catchUp reads everything after the hub's position and broadcasts it.
func (s *Service) catchUp(ctx context.Context) error {
	for {
		evs, err := readEvents(ctx, s.pool, s.hub.position(), 500)
		if err != nil {
			return err
		}
		s.hub.broadcast(evs)
		if len(evs) < 500 {
			return nil
		}
	}
}

// readLoop re-reads the table whenever the listener wakes it (or every
// PollInterval, in case a notification was lost with a connection).
func (s *Service) readLoop(ctx context.Context) error {
	t := time.NewTicker(s.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.hub.wake:
		case <-t.C:
		}
		if err := s.catchUp(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("reading hold events failed; retrying", "err", err)
		}
	}
}

// listenLoop holds this replica's one LISTEN connection (outside the pool),
// reconnecting with back-off; each notification pokes the reader.
func (s *Service) listenLoop(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("hold event listener lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

func (s *Service) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return err
	}
	// Anything committed while we were not listening.
	s.hub.poke()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.hub.poke()
	}
}

// closeConn closes a dedicated connection without hanging on a dead network.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

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
func (s *Service) FollowFrom(ctx context.Context, after int64, fromNow bool, filter EventFilter, started func(from int64) error, send func(*guardv1.WatchResponse) error) error {
	// A cursor below the retention watermark would silently skip pruned
	// events: refuse it (0 = "all retained events"; from_now reads nothing).
	var pruned0 int64
	if !fromNow {
		var err error
		if pruned0, err = retention.PrunedThrough(ctx, s.pool); err != nil {
			return status.Errorf(codes.Unavailable, "%v", err)
		}
		if after > 0 && after < pruned0 {
			return retention.CursorPruned(after, pruned0)
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
	for c < pos {
		evs, err := s.readRetained(ctx, c, pruned0)
		if status.Code(err) == codes.OutOfRange {
			return err
		}
		if err != nil {
			return status.Errorf(codes.Unavailable, "%v", err)
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Cursor > pos {
				break
			}
			if err := deliver(ev); err != nil {
				return err
			}
			c = ev.Cursor
		}
		if evs[len(evs)-1].Cursor >= pos {
			break
		}
	}
	if c < pos {
		c = pos
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-sub.C:
			if !ok {
				return status.Errorf(codes.ResourceExhausted, "%v (cursor %d)", sub.Err(), c)
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
// watermark is read in the same snapshot as the events, so a batch pruned
// between the two is never silently skipped. (Old pending holds' events
// stay below the watermark, harmlessly: that is why it must have moved.)
func (s *Service) readRetained(ctx context.Context, c, pruned0 int64) ([]*guardv1.WatchResponse, error) {
	var evs []*guardv1.WatchResponse
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		through, err := retention.PrunedThrough(ctx, tx)
		if err != nil {
			return err
		}
		if through > pruned0 && through > c {
			return retention.CursorPruned(c, through)
		}
		evs, err = readEvents(ctx, tx, c, 500)
		return err
	})
	return evs, err
}

// Await waits until the hold is resolved or timeout passes (0: only the
// call's deadline), returning the hold as it then is and whether it is
// resolved. It listens on the replica's event fan-out, never polls.
func (s *Service) Await(ctx context.Context, id string, timeout time.Duration) (*guardv1.Hold, bool, error) {
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
