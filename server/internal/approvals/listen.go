package approvals

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

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
