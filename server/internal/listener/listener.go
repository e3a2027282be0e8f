// Package listener is the replica's one LISTEN connection, built on
// pgxlisten: each domain hands a handler for its NOTIFY channel to Handle at
// assembly (app's buildServices), and Run holds one connection outside the
// pool for all of them. A lost connection is re-made with exponential
// back-off; after every (re)connect each handler's HandleBacklog runs once
// its channel is listened on again, so whatever committed while nobody was
// listening is re-read. A NOTIFY is only ever a wake-up: the tables are the
// truth.
//
// Its connection's application_name ends in clawguard-listener; the
// reconnect loop backs off from 100 ms, doubling to 5 s (cenkalti/backoff),
// and starts over once a connection listens on every channel.
package listener

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgxlisten"

	"github.com/clawguard/clawguard/proto/retry"
)

// AppName is the application_name of the listener's connection (appended to
// the one the database URL sets, if any), so operators and tests can tell it
// apart in pg_stat_activity.
const AppName = "clawguard-listener"

// Handler wakes a domain's readers. HandleNotification runs on every NOTIFY
// of its channel, HandleBacklog after every (re)connect once the channel is
// listened on; both run on the listener's goroutine and must not block.
type Handler interface {
	pgxlisten.Handler
	pgxlisten.BacklogHandler
}

// Reconnect back-off: the first retry after 100 ms, doubling up to 5 s,
// starting over once a connection listens on every channel.
const (
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 5 * time.Second
)

// Listener dispatches the notifications of one connection by channel.
type Listener struct {
	conf *pgx.ConnConfig
	log  *slog.Logger
	pl   pgxlisten.Listener

	channels int
	// Touched by the Listen goroutine only (Connect and the handlers run on it).
	bo        *backoff.ExponentialBackOff
	connects  int // connections attempted
	listening int // channels listened on by the current connection
	wait      func(ctx context.Context, d time.Duration) error
}

// New returns a listener connecting with conf (a copy is made; the pool's
// config is the usual source).
func New(conf *pgx.ConnConfig, log *slog.Logger) *Listener {
	c := conf.Copy()
	name := AppName
	if base := c.RuntimeParams["application_name"]; base != "" {
		name = base + "/" + AppName
	}
	c.RuntimeParams["application_name"] = name
	l := &Listener{
		conf: c,
		log:  log.With("component", "listener"),
		bo:   retry.Exponential(MinBackoff, MaxBackoff),
		wait: sleep,
	}
	l.pl = pgxlisten.Listener{
		Connect: l.connect,
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				l.log.WarnContext(ctx, "listener failed", "err", err)
			}
		},
		// Connect backs off itself (exponentially, not pgxlisten's fixed delay).
		ReconnectDelay: -1,
	}
	return l
}

// Handle routes channel's notifications to h. Call it before Run.
func (l *Listener) Handle(channel string, h Handler) {
	l.channels++
	l.pl.Handle(channel, counted{Handler: h, l: l})
}

// Run listens until ctx ends (then it returns nil).
func (l *Listener) Run(ctx context.Context) error {
	err := l.pl.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("listener: %w", err)
}

// connect makes the next connection: at once the first time, after the
// back-off delay every later time.
func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	if l.connects > 0 {
		if l.listening == l.channels {
			l.bo.Reset() // the last connection was healthy: start over
		}
		d := l.bo.NextBackOff()
		l.log.InfoContext(ctx, "listener reconnecting", "in", d)
		if err := l.wait(ctx, d); err != nil {
			return nil, err
		}
	}
	l.connects++
	l.listening = 0
	conn, err := pgx.ConnectConfig(ctx, l.conf)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// counted notes that its channel is listened on (pgxlisten calls
// HandleBacklog right after the channel's LISTEN).
type counted struct {
	Handler
	l *Listener
}

func (c counted) HandleBacklog(ctx context.Context, channel string, conn *pgx.Conn) error {
	c.l.listening++
	return c.Handler.HandleBacklog(ctx, channel, conn)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
