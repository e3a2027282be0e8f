package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/server/internal/sessions"
)

// SweepLoop runs Sweep every SweepInterval until ctx ends. Every replica
// runs it; the conditional UPDATEs make concurrent sweeps safe.
func (s *Service) SweepLoop(ctx context.Context) error {
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "lease sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep counts newly expired leases (each once, whichever replica sees it
// first), moves the active sessions of dead or absent runners to live ones
// (respecting pinned hosts; a session with no eligible runner stays where it
// is and is retried next sweep), and refreshes the gauges.
func (s *Service) Sweep(ctx context.Context) error {
	if err := s.graceAfterOutage(ctx); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `UPDATE runners SET expired_at = now()
		WHERE lease_expires_at <= now() AND expired_at IS NULL RETURNING id`)
	if err != nil {
		return fmt.Errorf("claim expired leases: %w", err)
	}
	expired, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("claim expired leases: %w", err)
	}
	for _, id := range expired {
		s.metrics.LeaseExpirationsTotal.Inc()
		s.log.WarnContext(ctx, "runner lease expired", "runner", id)
	}

	// Only runners whose expiry has been claimed (counted) lose their
	// sessions: an expiry is always counted before anything moves.
	type homeless struct{ id, owner, pinned string }
	rows, err = s.pool.Query(ctx, `
		SELECT s.id, COALESCE(s.runner_id, ''), g.pinned_host
		FROM sessions s JOIN agent_groups g ON g.id = s.agent_group_id
		LEFT JOIN runners r ON r.id = s.runner_id
		WHERE s.status = 'active' AND (r.id IS NULL OR (r.lease_expires_at <= now() AND r.expired_at IS NOT NULL))
		ORDER BY s.created_at LIMIT 500`)
	if err != nil {
		return fmt.Errorf("find sessions of dead runners: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (homeless, error) {
		var h homeless
		return h, r.Scan(&h.id, &h.owner, &h.pinned)
	})
	if err != nil {
		return fmt.Errorf("find sessions of dead runners: %w", err)
	}
	for _, h := range list {
		var to string
		moved := false
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			if to, err = sessions.PickRunnerTx(ctx, tx, h.pinned); err != nil || to == "" {
				return err
			}
			moved, err = sessions.AssignTx(ctx, tx, h.id, h.owner, to)
			return err
		})
		if err != nil {
			return err
		}
		if moved {
			s.log.InfoContext(ctx, "session reassigned", "session", h.id, "from", h.owner, "to", to)
		}
	}
	return s.refreshGauges(ctx)
}

// graceAfterOutage stamps the registry clock (the database's now()) and,
// when the previous stamp is older than half a lease — no replica could
// reach the database, or none ran — gives every lease that was still live
// when the gap began a fresh LeaseTTL from now: runners could not heartbeat
// through the outage, and a healthy one must not lose its sessions for it.
// The clock row is locked, so concurrent sweeps judge one gap once.
func (s *Service) graceAfterOutage(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var gapStart time.Time
		var gap bool
		err := tx.QueryRow(ctx, `SELECT seen_at, seen_at < now() - $1::interval FROM registry_clock WHERE id = 1 FOR UPDATE`,
			s.opts.LeaseTTL/2).Scan(&gapStart, &gap)
		if err != nil {
			return fmt.Errorf("read registry clock: %w", err)
		}
		if gap {
			tag, err := tx.Exec(ctx, `UPDATE runners SET lease_expires_at = now() + $2::interval
				WHERE expired_at IS NULL AND lease_expires_at > $1 AND lease_expires_at < now() + $2::interval`, gapStart, s.opts.LeaseTTL)
			if err != nil {
				return fmt.Errorf("extend leases after an outage: %w", err)
			}
			s.log.WarnContext(ctx, "the database was unreachable (or no replica ran); leases live then get a grace period",
				"since", gapStart, "leases_extended", tag.RowsAffected())
		}
		if _, err := tx.Exec(ctx, `UPDATE registry_clock SET seen_at = now() WHERE id = 1`); err != nil {
			return fmt.Errorf("stamp registry clock: %w", err)
		}
		return nil
	})
}

func (s *Service) refreshGauges(ctx context.Context) error {
	var live, pending int64
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM runners WHERE lease_expires_at > now()),
		(SELECT count(*) FROM runner_pushes WHERE acked_at IS NULL)`).Scan(&live, &pending)
	if err != nil {
		return fmt.Errorf("read registry gauges: %w", err)
	}
	s.metrics.RunnersLive.Set(float64(live))
	s.metrics.PushesPending.Set(float64(pending))
	return nil
}
