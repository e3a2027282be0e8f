// Package telegram is the reference chat bridge: a client of the control
// plane (like ncl) that routes every Telegram message the bot sees through
// Registry.RouteInbound, turns Approvals.Watch events into DM cards with
// inline buttons, turns button presses into Approvals.Resolve as the
// pressing Telegram user, and delivers agent replies from the chat outbox.
//
// Users are "telegram:<numeric user id>" (Telegram's stable id; a private
// chat's id is its user's id, so a card for telegram:42 goes to chat 42).
// Chats are "telegram" messaging groups keyed by the chat id.
//
// Restart safety: the Telegram update offset, the Watch cursor, the outbox
// cursor and the card-message map live in one state file, replaced
// atomically after each handled item; an update is confirmed to Telegram
// only once it is handled, and a stop lets the item in hand finish.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/go-telegram/bot"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
)

// Bridge is one running bridge.
type Bridge struct {
	cfg  Config
	log  *slog.Logger
	m    *Metrics
	reg  *prometheus.Registry
	api  *botAPI
	st   *store
	appr guardv1.ApprovalsClient
	rgy  guardv1.RegistryClient

	lastPoll  atomic.Int64 // unix nanos of the last successful getUpdates
	watching  atomic.Bool
	outboxing atomic.Bool
	listening chan string // the HTTP address once bound
}

// New builds a bridge over an open connection to the control plane.
func New(cfg Config, conn grpc.ClientConnInterface, log *slog.Logger) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := openStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	api, err := newBotAPI(cfg.APIURL, cfg.BotToken, cfg.PollTimeout, log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Bridge{
		cfg: cfg, log: log, m: NewMetrics(reg), reg: reg, api: api, st: st,
		appr: guardv1.NewApprovalsClient(conn), rgy: guardv1.NewRegistryClient(conn),
		listening: make(chan string, 1),
	}, nil
}

// HTTPAddr is the bound address of /healthz, /readyz and /metrics, once
// listening.
func (b *Bridge) HTTPAddr(ctx context.Context) (string, error) {
	select {
	case a := <-b.listening:
		b.listening <- a
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Run serves until ctx ends, then lets the item in hand of every loop
// finish (within ShutdownGrace) and returns.
func (b *Bridge) Run(ctx context.Context) error {
	me, err := b.api.me(ctx)
	if err != nil {
		return err
	}
	s := b.st.snapshot()
	b.log.Info("telegram bridge starting", "bot", me.Username, "bot_id", me.ID, "server", b.cfg.Server,
		"update_offset", s.UpdateOffset, "watch_cursor", s.WatchCursor, "outbox_cursor", s.OutboxCursor, "cards", len(s.Cards))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return b.pollLoop(gctx) })
	g.Go(func() error { return b.watchLoop(gctx) })
	g.Go(func() error { return b.outboxLoop(gctx) })
	if b.cfg.HTTPListen != "" {
		g.Go(func() error { return b.serveHTTP(gctx) })
	}
	err = g.Wait()
	b.log.Info("telegram bridge stopped", "err", err)
	return err
}

// work is the context an item is handled in: it outlives a stop by at
// most ShutdownGrace, so a click being resolved is finished, not dropped.
func (b *Bridge) work(ctx context.Context) (context.Context, context.CancelFunc) {
	w, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(b.cfg.ShutdownGrace, cancel)
		context.AfterFunc(w, func() { t.Stop() })
	})
	return w, func() { stop(); cancel() }
}

// retry runs fn until it succeeds, fails permanently or ctx ends; it
// backs off after each transient failure.
func (b *Bridge) retry(ctx context.Context, op string, fn func(context.Context) error) error {
	delays := b.retryDelays()
	for {
		err := fn(ctx)
		if err == nil || !transient(err) {
			return err
		}
		b.m.Errors.WithLabelValues(op).Inc()
		wait := delays.NextBackOff()
		var tooMany *bot.TooManyRequestsError
		if errors.As(err, &tooMany) && tooMany.RetryAfter > 0 {
			wait = time.Duration(tooMany.RetryAfter) * time.Second // Telegram's flood control says how long
		}
		b.log.Warn("transient failure; retrying", "op", op, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// retryDelays is the back-off of every retry loop of the bridge: 100 ms,
// doubling up to RetryMax.
func (b *Bridge) retryDelays() *backoff.ExponentialBackOff {
	return retry.Exponential(100*time.Millisecond, b.cfg.RetryMax)
}

// transient: worth retrying (the server or Telegram is briefly away).
func transient(err error) bool {
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
			return true
		}
		return false
	}
	var tooMany *bot.TooManyRequestsError
	switch {
	case errors.As(err, &tooMany):
		return true
	case errors.Is(err, bot.ErrorForbidden), errors.Is(err, bot.ErrorBadRequest),
		errors.Is(err, bot.ErrorNotFound), errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorConflict):
		return false
	case errors.Is(err, context.Canceled):
		return false
	}
	return true // network errors, 5xx
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (b *Bridge) serveHTTP(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(b.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := b.notReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	ln, err := net.Listen("tcp", b.cfg.HTTPListen)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	b.listening <- ln.Addr().String()
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// notReady says why the bridge is not ready ("" = ready): Telegram polled
// recently and both control-plane streams are open.
func (b *Bridge) notReady() string {
	last := time.Unix(0, b.lastPoll.Load())
	switch {
	case time.Since(last) > 2*b.cfg.PollTimeout+10*time.Second:
		return "telegram getUpdates has not succeeded recently"
	case !b.watching.Load():
		return "Approvals.Watch is not connected"
	case !b.outboxing.Load():
		return "the chat outbox stream is not connected"
	}
	return ""
}

func userID(telegramUserID int64) string {
	return ChannelType + ":" + strconv.FormatInt(telegramUserID, 10)
}
