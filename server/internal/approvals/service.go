package approvals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

// ApprovedFunc runs after an approval commits (e.g. the server replays a
// command hold with its grant). It may fail; the hold stays approved.
type ApprovedFunc func(ctx context.Context, hold *guardv1.Hold) error

// Service is the approvals domain: one per replica.
type Service struct {
	pool    *pgxpool.Pool
	metrics *metrics.Metrics
	log     *slog.Logger
	cfg     config.Config

	hub         *hub
	startedAt   time.Time
	startCursor int64 // the event position at Start

	mu       sync.RWMutex
	approved map[string][]ApprovedFunc

	gaugeMu      sync.Mutex
	pendingKinds []string // kinds with pending holds at the last RefreshGauges

	// Tunables (defaults from New; tests shorten them).
	ExpiryInterval    time.Duration // how often pending holds past expires_at are expired
	GaugeInterval     time.Duration // how often HoldsPending is refreshed from the table
	ReasonWait        time.Duration // how long "Reject with reason…" waits before rejecting without one
	PollInterval      time.Duration // event read fallback when no NOTIFY arrives
	SubscriberQueue   int           // per-subscriber buffer before a slow one is dropped
	WebhookBackoff    time.Duration // first retry delay; doubles up to WebhookMaxBackoff
	WebhookMaxBackoff time.Duration
	WebhookAttempts   int
	HandlerTimeout    time.Duration // per approved handler
	DispatchGrace     time.Duration // an approval still undispatched after this is recovered
	// ReplayGrace: an approved hold untouched this long with no replay in
	// flight is reconciled (its replay re-sent, or given up on with a reason).
	ReplayGrace       time.Duration
	ReconcileInterval time.Duration
	webhookSecret     []byte
	// BeforeStepCommit, when set (tests), runs inside an escalation step's
	// transaction after its claims and events, before the commit; an error
	// undoes the batch.
	BeforeStepCommit func(ctx context.Context, step string, holds []*guardv1.Hold) error
}

// New builds the service. Call Start before serving and run Run in the
// background.
func New(pool *pgxpool.Pool, m *metrics.Metrics, log *slog.Logger, cfg config.Config) *Service {
	return &Service{
		pool:              pool,
		metrics:           m,
		log:               log.With("component", "approvals"),
		cfg:               cfg,
		hub:               newHub(),
		startedAt:         time.Now(),
		approved:          map[string][]ApprovedFunc{},
		ExpiryInterval:    500 * time.Millisecond,
		GaugeInterval:     5 * time.Second,
		ReasonWait:        10 * time.Minute,
		PollInterval:      2 * time.Second,
		SubscriberQueue:   1024,
		WebhookBackoff:    200 * time.Millisecond,
		WebhookMaxBackoff: 30 * time.Second,
		WebhookAttempts:   8,
		HandlerTimeout:    30 * time.Second,
		DispatchGrace:     2 * time.Minute,
		ReplayGrace:       30 * time.Second,
		ReconcileInterval: 5 * time.Second,
	}
}

// OnApproved registers fn for approved holds of kind (handlers run after
// the resolution commits, in registration order; their failures are logged
// and never un-resolve the hold).
func (s *Service) OnApproved(kind string, fn ApprovedFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approved[kind] = append(s.approved[kind], fn)
}

func (s *Service) handlerKinds() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	kinds := make([]string, 0, len(s.approved))
	for k := range s.approved {
		kinds = append(kinds, k)
	}
	return kinds
}

func (s *Service) approvedHandlers(kind string) []ApprovedFunc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]ApprovedFunc(nil), s.approved[kind]...)
}

// newHoldID makes a hold id.
func newHoldID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "hold_" + hex.EncodeToString(b)
}
