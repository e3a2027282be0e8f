package approvals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// Start prepares the replica before it serves: the event position it
// follows from, the webhook secret, and the sweep of holds marked "swept on
// restart" (their outcome is published like any other resolution).
func (s *Service) Start(ctx context.Context) error {
	var ready bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('hold_events') IS NOT NULL`).Scan(&ready); err != nil {
		return fmt.Errorf("approvals: check schema: %w", err)
	}
	if !ready {
		// Unmigrated database: the server reports NOT_SERVING; the loops
		// pick the tables up once they exist.
		s.log.Warn("approvals: schema not migrated yet; sweep skipped")
		return nil
	}
	pos, err := LatestCursor(ctx, s.pool)
	if err != nil {
		return err
	}
	s.hub.mu.Lock()
	if pos > s.hub.last {
		s.hub.last = pos
	}
	s.hub.mu.Unlock()
	s.startCursor = pos
	if s.cfg.WebhookURL != "" {
		if s.cfg.WebhookSecretFile == "" {
			return fmt.Errorf("--webhook-url needs --webhook-secret-file (events are signed)")
		}
		b, err := os.ReadFile(s.cfg.WebhookSecretFile)
		if err != nil {
			return fmt.Errorf("webhook secret: %w", err)
		}
		s.webhookSecret = []byte(strings.TrimSpace(string(b)))
		if len(s.webhookSecret) == 0 {
			return fmt.Errorf("webhook secret file %s is empty", s.cfg.WebhookSecretFile)
		}
	}
	n, err := s.SweepOnStart(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.Info("swept holds left by a previous process", "count", n)
	}
	return nil
}

// Run is the replica's background work until ctx ends: the event reader
// (Watch, Await, webhook; the replica's listener wakes it through
// EventWakeups), the expiry and escalation sweeper, the pending-hold gauges, and the
// webhook notifier when configured.
func (s *Service) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.readLoop(ctx) })
	g.Go(func() error { return s.every(ctx, s.ExpiryInterval, "expire holds", s.expireTick) })
	g.Go(func() error { return s.every(ctx, s.GaugeInterval, "refresh hold gauges", s.RefreshGauges) })
	g.Go(func() error { return s.every(ctx, s.GaugeInterval, "dispatch missed approvals", s.dispatchTick) })
	g.Go(func() error {
		return s.every(ctx, s.ReconcileInterval, "reconcile unapplied approvals", s.reconcileTick)
	})
	if s.cfg.WebhookURL != "" {
		g.Go(func() error { return s.runWebhook(ctx) })
	}
	return g.Wait()
}

func (s *Service) dispatchTick(ctx context.Context) error {
	_, err := s.DispatchMissed(ctx)
	return err
}

func (s *Service) expireTick(ctx context.Context) error {
	if _, err := s.ExpireDue(ctx); err != nil {
		return err
	}
	if _, err := s.EscalateDue(ctx); err != nil {
		return err
	}
	_, err := s.LapseReasonCaptures(ctx)
	return err
}

// every runs fn now and then every d until ctx ends; failures are logged
// (the next tick retries), never fatal.
func (s *Service) every(ctx context.Context, d time.Duration, what string, fn func(context.Context) error) error {
	t := time.NewTicker(d)
	defer t.Stop()
	last := ""
	for {
		// Log a failure when it changes, not on every tick.
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			if err.Error() != last {
				s.log.Warn(what+" failed", "err", err)
			}
			last = err.Error()
		} else {
			last = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RefreshGauges sets HoldsPending and OldestPendingHoldSeconds from the
// table, so every replica reports the same numbers.
func (s *Service) RefreshGauges(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT kind, count(*), EXTRACT(EPOCH FROM now() - min(created_at))::float8
		FROM holds WHERE status = 'pending' GROUP BY kind`)
	if err != nil {
		return fmt.Errorf("count pending holds: %w", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	oldest := 0.0
	for rows.Next() {
		var (
			kind string
			n    int64
			age  float64
		)
		if err := rows.Scan(&kind, &n, &age); err != nil {
			return fmt.Errorf("count pending holds: %w", err)
		}
		seen[kind] = true
		s.metrics.HoldsPending.WithLabelValues(kind).Set(float64(n))
		oldest = max(oldest, age)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count pending holds: %w", err)
	}
	// Zero every known kind with no pending hold now: the pre-initialised
	// ones and any seen pending before (a requested kind outside the
	// catalog's list would otherwise keep its last count).
	s.gaugeMu.Lock()
	defer s.gaugeMu.Unlock()
	for _, k := range append(s.metrics.HoldKinds(), s.pendingKinds...) {
		if !seen[k] {
			s.metrics.HoldsPending.WithLabelValues(k).Set(0)
		}
	}
	s.pendingKinds = s.pendingKinds[:0]
	for k := range seen {
		s.pendingKinds = append(s.pendingKinds, k)
	}
	s.metrics.OldestPendingHoldSeconds.Set(oldest)
	return s.refreshWebhookLag(ctx)
}

// refreshWebhookLag sets WebhookLagSeconds: how long the oldest event past
// the webhook's recorded cursor has waited. Read from the table, so it is
// right whichever replica leads (and grows while none does).
func (s *Service) refreshWebhookLag(ctx context.Context) error {
	if s.cfg.WebhookURL == "" {
		s.metrics.WebhookLagSeconds.Set(0)
		return nil
	}
	var lag float64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE((
			SELECT EXTRACT(EPOCH FROM now() - e.created_at)::float8 FROM hold_events e
			WHERE e.cursor > p.cursor ORDER BY e.cursor LIMIT 1), 0)
		FROM webhook_progress p WHERE p.url = $1`, s.cfg.WebhookURL).Scan(&lag)
	if errors.Is(err, pgx.ErrNoRows) {
		lag = 0 // no leader has started yet: it starts from its own start
	} else if err != nil {
		return fmt.Errorf("read webhook lag: %w", err)
	}
	s.metrics.WebhookLagSeconds.Set(max(lag, 0))
	return nil
}
