// Package bridge is the channel-agnostic core of a chat bridge: a client of
// the control plane (like ncl) that turns Approvals.Watch events into DM
// cards with buttons, turns a button press into Approvals.Resolve as the
// pressing user, routes every message the bot sees through
// Registry.RouteInbound, and delivers agent replies from the chat outbox.
// A chat platform (Telegram, Slack) is a small adapter, a Chat: how to send
// and edit a message with buttons, how a user's DM is addressed, and its own
// loop receiving messages and presses, which it hands to the Bridge.
//
// A bridge speaks for one channel namespace: its users are
// "<namespace>:<handle>" and its chats are messaging groups of that
// channel type; the server refuses its token anything else.
//
// Restart safety: the Watch cursor, the outbox cursor and the card-message
// map (and the chat's own inbound offset, where it has one) live in one
// state file, replaced atomically after each handled item; a stop lets
// the item in hand finish.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
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

// Button is one button under a message: a press sends Data back to the
// bridge; a button with a URL is a link instead (the console, for a hold
// that must be confirmed there).
type Button struct {
	Label string
	Data  string
	URL   string
}

// Chat is one chat platform, as the bridge core uses it.
type Chat interface {
	// Connect checks the platform's credentials and says who the bot is,
	// for the start log.
	Connect(ctx context.Context) (bot string, err error)
	// Receive runs the platform's inbound loop until ctx ends, handing
	// each message and press to the bridge (Bridge.Handle with
	// HandleMessage, HandleClick).
	Receive(ctx context.Context) error
	// DMChat is the chat a user's cards and prompts go to, from the user's
	// handle (the id after "<namespace>:"); false when the handle is not of
	// the platform's shape.
	DMChat(handle string) (chat string, ok bool)
	// Post sends text with buttons (none: a plain message) to a chat and
	// says where the message is.
	Post(ctx context.Context, chat, text string, buttons []Button) (Card, error)
	// Edit replaces a message's text and buttons (none: the buttons go);
	// an edit that changes nothing is success.
	Edit(ctx context.Context, at Card, text string, buttons []Button) error
	// Answer tells the presser of a button what came of it (Telegram's
	// toast on the button); alert marks a refusal or failure.
	Answer(ctx context.Context, c Click, text string, alert bool)
	// AskReason asks the presser of "Reject with reason…" for the reason,
	// beside the DM prompt every chat gets (Slack opens a form).
	AskReason(ctx context.Context, c Click, h *guardv1.Hold)
	// Retryable classifies a platform error that is no gRPC status: worth
	// trying again, and after how long when the platform says (0: the
	// bridge's back-off).
	Retryable(err error) (bool, time.Duration)
	// NotReady says why the platform side is not ready ("" = ready).
	NotReady() string
}

// ErrNotAChat is a chat id the platform cannot have (a Telegram chat id
// that is no number): sending to it again changes nothing.
var ErrNotAChat = errors.New("not a chat id of this platform")

// Spec names a bridge's chat: its channel namespace, the metric and state
// file prefix, and the words for its logs and metric help.
type Spec struct {
	Namespace string // "telegram": users are telegram:<handle>, chats are telegram messaging groups
	Title     string // "Telegram"
	Ops       []string
	// AnswersOnCard: a refusal of a press is shown on the pressed card
	// itself (a chat without a toast on the button), not only answered.
	AnswersOnCard bool
	// ConsoleURL, when set, is the link on the card of a hold that must be
	// confirmed in the console rather than by a tap (step-up); "" for a
	// hold a tap may resolve.
	ConsoleURL func(h *guardv1.Hold) string
}

// Bridge is the running core of one bridge.
type Bridge struct {
	cfg  Config
	spec Spec
	log  *slog.Logger
	m    *Metrics
	reg  *prometheus.Registry
	st   *store
	appr guardv1.ApprovalsClient
	rgy  guardv1.RegistryClient
	chat Chat

	cardMu    sync.Mutex // one card edit at a time: a note never lands after the closing edit
	watching  atomic.Bool
	outboxing atomic.Bool
	listening chan string // the HTTP address once bound
}

// Settings is a chat's config: the common one embedded (Common) and its
// own Validate, which checks both.
type Settings interface {
	Validate() error
	Common() Config
}

// New builds a bridge over an open connection to the control plane; the
// chat is attached with SetChat before Run (the adapter needs the bridge
// to hand it what it receives).
func New(settings Settings, spec Spec, conn grpc.ClientConnInterface, log *slog.Logger) (*Bridge, error) {
	if err := settings.Validate(); err != nil {
		return nil, err
	}
	cfg := settings.Common()
	if spec.ConsoleURL == nil && cfg.ConsoleURL != "" {
		// --console-url: a step-up hold's card links to its console page.
		spec.ConsoleURL = func(h *guardv1.Hold) string {
			if !h.GetStepUp() {
				return ""
			}
			return HoldPage(cfg.ConsoleURL, h.GetId())
		}
	}
	st, err := openStore(cfg.DataDir, spec.Namespace)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Bridge{
		cfg: cfg, spec: spec, log: log, m: NewMetrics(reg, spec.Namespace, spec.Title, spec.Ops...), reg: reg, st: st,
		appr: guardv1.NewApprovalsClient(conn), rgy: guardv1.NewRegistryClient(conn),
		listening: make(chan string, 1),
	}, nil
}

// SetChat attaches the platform adapter.
func (b *Bridge) SetChat(c Chat) { b.chat = c }

// Metrics are the bridge's metrics (the adapter counts its own errors).
func (b *Bridge) Metrics() *Metrics { return b.m }

// State is a copy of the persisted state.
func (b *Bridge) State() State { return b.st.snapshot() }

// SaveInboundOffset persists the chat's inbound offset, retrying a failing
// disk until stopped (moving on without it would handle the item again
// after a restart).
func (b *Bridge) SaveInboundOffset(ctx context.Context, next int64) error {
	for {
		err := b.st.update(func(s *State) { s.InboundOffset = next })
		if err == nil {
			return nil
		}
		b.m.Errors.WithLabelValues("state").Inc()
		b.log.Error("saving the inbound offset failed", "err", err)
		if !Sleep(ctx, time.Second) {
			return fmt.Errorf("stopping with an unsaved inbound offset: %w", err)
		}
	}
}

// UserID is the namespaced user id of a platform handle.
func (b *Bridge) UserID(handle string) string { return b.spec.Namespace + ":" + handle }

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
	if b.chat == nil {
		return errors.New("bridge: no chat attached")
	}
	bot, err := b.chat.Connect(ctx)
	if err != nil {
		return err
	}
	s := b.st.snapshot()
	b.log.Info(b.spec.Namespace+" bridge starting", "bot", bot, "server", b.cfg.Server,
		"inbound_offset", s.InboundOffset, "watch_cursor", s.WatchCursor, "outbox_cursor", s.OutboxCursor, "cards", len(s.Cards))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return b.chat.Receive(gctx) })
	g.Go(func() error { return b.watchLoop(gctx) })
	g.Go(func() error { return b.outboxLoop(gctx) })
	if b.cfg.HTTPListen != "" {
		g.Go(func() error { return b.serveHTTP(gctx) })
	}
	err = g.Wait()
	b.log.Info(b.spec.Namespace+" bridge stopped", "err", err)
	return err
}

// Handle runs one received item (a message, a press) to the end: within a
// context that outlives a stop by at most ShutdownGrace, asked again after
// each transient failure. It reports whether the item is done — handled,
// or failed for good (logged as dropped) — rather than cut short by a stop
// while the server or the chat was away, which the chat should receive
// again.
func (b *Bridge) Handle(ctx context.Context, op, item string, fn func(context.Context) error) (done bool) {
	err := b.finish(ctx, op, fn)
	if err != nil && b.Transient(err) {
		return false
	}
	if err != nil {
		b.log.Error("item dropped", "op", op, "item", item, "err", err)
	}
	return true
}

// finish runs fn for one item, in the item's context (work), asked again
// after each transient failure (retry).
func (b *Bridge) finish(ctx context.Context, op string, fn func(context.Context) error) error {
	w, done := b.work(ctx)
	defer done()
	return b.retry(w, op, fn)
}

// follow keeps a control-plane stream open: once reads it until it ends
// (up is set while it is open); after an end that is not a stop, ended may
// act on the error (nil: nothing to do), and the stream is opened again
// after a back-off.
func (b *Bridge) follow(ctx context.Context, op, stream string, up *atomic.Bool, once func(context.Context) error, ended func(error) error) error {
	delays := b.RetryDelays()
	for ctx.Err() == nil {
		err := once(ctx)
		up.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if ended != nil {
			if err := ended(err); err != nil {
				return err
			}
		}
		b.m.Errors.WithLabelValues(op).Inc()
		delay := delays.NextBackOff()
		b.log.Warn(stream+" ended; reconnecting", "err", err, "in", delay)
		if !Sleep(ctx, delay) {
			return nil
		}
	}
	return nil
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
	delays := b.RetryDelays()
	for {
		err := fn(ctx)
		if err == nil || !b.Transient(err) {
			return err
		}
		b.m.Errors.WithLabelValues(op).Inc()
		wait := delays.NextBackOff()
		if _, after := b.chat.Retryable(err); after > 0 {
			wait = after // the platform's flood control says how long
		}
		b.log.Warn("transient failure; retrying", "op", op, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// RetryDelays is the back-off of every retry loop of the bridge: 100 ms,
// doubling up to RetryMax.
func (b *Bridge) RetryDelays() *backoff.ExponentialBackOff {
	return retry.Exponential(100*time.Millisecond, b.cfg.RetryMax)
}

// Transient: worth retrying (the server or the chat is briefly away).
func (b *Bridge) Transient(err error) bool {
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrNotAChat) {
		return false
	}
	again, _ := b.chat.Retryable(err)
	return again
}

// Sleep waits d or until ctx ends (false).
func Sleep(ctx context.Context, d time.Duration) bool {
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
		if why := b.NotReady(); why != "" {
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

// NotReady says why the bridge is not ready ("" = ready): the chat is
// reachable and both control-plane streams are open.
func (b *Bridge) NotReady() string {
	if why := b.chat.NotReady(); why != "" {
		return why
	}
	switch {
	case !b.watching.Load():
		return "Approvals.Watch is not connected"
	case !b.outboxing.Load():
		return "the chat outbox stream is not connected"
	}
	return ""
}
