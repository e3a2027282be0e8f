package approvals

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// catchUp reads everything after the hub's position and broadcasts it.
func (s *Service) catchUp(ctx context.Context) error {
	for {
		from := s.hub.position()
		evs, through, err := readEvents(ctx, s.pool, from, 500)
		if err != nil {
			return err
		}
		s.hub.broadcast(evs, through)
		if through-from < 500 {
			return nil
		}
	}
}

// readLoop re-reads the table whenever the replica's listener wakes it (or
// every PollInterval, in case a notification was lost with a connection).
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

// EventWakeups is the listener's handler of EventsChannel (registered in
// app's buildServices): a NOTIFY pokes the event reader, and so does every
// (re)connect of the listener, since events committed while nobody listened
// are only in the table.
type EventWakeups struct{ hub *hub }

// EventWakeups returns the handler that wakes this replica's event reader.
func (s *Service) EventWakeups() EventWakeups { return EventWakeups{hub: s.hub} }

// HandleNotification pokes the reader.
func (w EventWakeups) HandleNotification(context.Context, *pgconn.Notification, *pgx.Conn) error {
	w.hub.poke()
	return nil
}

// HandleBacklog pokes the reader: anything committed while not listening.
func (w EventWakeups) HandleBacklog(context.Context, string, *pgx.Conn) error {
	w.hub.poke()
	return nil
}
