package metering

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Settle settles a reservation to what the call used, exactly once: a
// second settle (a retry whose answer was lost) answers settled=false and
// counts nothing. A call the provider's usage did not cover whole (a cut
// stream) is settled with what was seen and its output at the reserved
// bound. A call that was not reserved (its group has no budget), or whose
// reservation the database lost (it commits asynchronously), is recorded
// from its decision and settled at once.
func (s *Service) Settle(ctx context.Context, runnerID string, req *guardv1.SettleModelUsageRequest) (_ *guardv1.SettleModelUsageResponse, err error) {
	defer store.Faulted(&err, "model settlement")
	if req.GetReservationId() == "" {
		return nil, fault.InvalidField("reservation_id", "required")
	}
	if err := checkTokens("used", req.GetUsed()); err != nil {
		return nil, err
	}
	if err := checkTokens("worst", req.GetWorst()); err != nil {
		return nil, err
	}
	var done *settled
	err = store.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		done = nil
		r, found, err := lockReservation(ctx, tx, req.GetReservationId())
		if err != nil {
			return err
		}
		if !found {
			if r, err = s.record(ctx, tx, runnerID, req); err != nil {
				return err
			}
		}
		if r.runner != runnerID {
			return fault.New(fault.Denied, "reservation %q was made by another runner", req.GetReservationId())
		}
		if r.settledAt != nil {
			return nil
		}
		outcome := "complete"
		if !req.GetComplete() {
			outcome = "incomplete"
		}
		done, err = settleTx(ctx, tx, r, usedOf(r, req.GetUsed(), req.GetComplete()), outcome)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.count(done)
	return &guardv1.SettleModelUsageResponse{Settled: done != nil}, nil
}

// usedOf is what a call is settled to: the provider's usage, or for a call
// it did not cover whole, what was seen with the output at its reserved
// bound (and the input at its bound when none was seen).
func usedOf(r reservation, u *guardv1.ModelTokens, complete bool) modelrule.Tokens {
	t := modelrule.Tokens{Input: u.GetInput(), Output: u.GetOutput(), CacheRead: u.GetCacheRead(), CacheWrite: u.GetCacheWrite()}
	if complete {
		return t
	}
	t.Output = max(t.Output, r.worst.Output)
	if t.Input == 0 && t.CacheRead == 0 && t.CacheWrite == 0 {
		t.Input = r.worst.Input
	}
	return t
}

// lockReservation reads and locks a reservation.
func lockReservation(ctx context.Context, tx pgx.Tx, id string) (reservation, bool, error) {
	var r reservation
	err := tx.QueryRow(ctx, `SELECT id, agent_group_id, session_id, runner_id, provider, model, day, worst_input, worst_output,
			tokens, cost, counted_period, counted_start, settled_at
		FROM model_reservations WHERE id = $1 FOR UPDATE`, id).Scan(&r.id, &r.group, &r.session, &r.runner, &r.provider, &r.model,
		&r.day, &r.worst.Input, &r.worst.Output, &r.tokens, &r.cost, &r.countedPeriod, &r.countedStart, &r.settledAt)
	if store.IsNoRows(err) {
		return reservation{}, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read reservation %s: %w", id, err)
	}
	return r, true, nil
}

// record records a call that has no reservation — its group has no budget,
// or the database lost it — from the model.call ALLOW it cites, which must
// be the session's (placed on the runner), younger than the sweep's age.
// It counts on no counter: nothing was reserved on one (or that was lost
// with the reservation).
func (s *Service) record(ctx context.Context, tx pgx.Tx, runnerID string, req *guardv1.SettleModelUsageRequest) (reservation, error) {
	if req.GetSessionId() == "" {
		return reservation{}, fault.NotFoundf("reservation %q not found", req.GetReservationId())
	}
	group, now, err := hostedSession(ctx, tx, runnerID, req.GetSessionId())
	if err != nil {
		return reservation{}, err
	}
	c, err := cite(ctx, tx, req.GetReservationId(), req.GetSessionId(), modelrule.CallAction, SweepAge)
	if err != nil {
		return reservation{}, err
	}
	w := req.GetWorst()
	r := reservation{id: req.GetReservationId(), group: group, session: req.GetSessionId(), runner: runnerID,
		provider: c.resource[modelrule.KeyProvider], model: c.resource[modelrule.KeyModel], day: dayOf(now),
		worst: modelrule.Tokens{Input: w.GetInput(), Output: w.GetOutput(), CacheRead: w.GetCacheRead(), CacheWrite: w.GetCacheWrite()}}
	r.tokens = r.worst.Total()
	if err := insertReservation(ctx, tx, r); err != nil {
		return reservation{}, err
	}
	r.worst = modelrule.Tokens{Input: satAdd(r.worst.Input, satAdd(r.worst.CacheRead, r.worst.CacheWrite)), Output: r.worst.Output}
	return r, nil
}

// settled is what one settle counted, for the metrics after its commit.
type settled struct {
	provider, model, outcome string
	used                     modelrule.Tokens
	cost                     int64
}

// settleTx marks the reservation settled (once: nil when another got there
// first), adds its usage to the day's row and to every counter of the group
// covering that day, and moves its reservation out of reserved.
func settleTx(ctx context.Context, tx pgx.Tx, r reservation, used modelrule.Tokens, outcome string) (*settled, error) {
	if err := lockShared(ctx, tx, r.group); err != nil {
		return nil, fmt.Errorf("lock the budget counters of %s: %w", r.group, err)
	}
	price, err := priceFor(ctx, tx, r.provider, r.model)
	if err != nil {
		return nil, err
	}
	cost := price.Cost(used)
	tag, err := tx.Exec(ctx, `UPDATE model_reservations SET settled_at = now(), complete = $2 WHERE id = $1 AND settled_at IS NULL`,
		r.id, outcome == "complete")
	if err != nil {
		return nil, fmt.Errorf("settle reservation %s: %w", r.id, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO model_usage AS u (agent_group_id, day, provider, model, calls, input_tokens, output_tokens,
			cache_read_tokens, cache_write_tokens, cost_micros) VALUES ($1, $2, $3, $4, 1, $5, $6, $7, $8, $9)
		ON CONFLICT (agent_group_id, day, provider, model) DO UPDATE SET calls = u.calls + 1,
			input_tokens = u.input_tokens + $5, output_tokens = u.output_tokens + $6, cache_read_tokens = u.cache_read_tokens + $7,
			cache_write_tokens = u.cache_write_tokens + $8, cost_micros = u.cost_micros + $9`,
		r.group, r.day, r.provider, r.model, used.Input, used.Output, used.CacheRead, used.CacheWrite, cost); err != nil {
		return nil, fmt.Errorf("record the usage of reservation %s: %w", r.id, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE model_spend SET spent_tokens = spent_tokens + $3, spent_cost = spent_cost + $4,
			reserved_tokens = reserved_tokens - CASE WHEN period = $5 AND period_start = $6 THEN $7::bigint ELSE 0 END,
			reserved_cost = reserved_cost - CASE WHEN period = $5 AND period_start = $6 THEN $8::bigint ELSE 0 END
		WHERE agent_group_id = $1 AND ((period = 'day' AND period_start = $2) OR (period = 'month' AND period_start = date_trunc('month', $2::date)::date))`,
		r.group, r.day, used.Total(), cost, r.countedPeriod, r.countedStart, r.tokens, r.cost); err != nil {
		return nil, fmt.Errorf("move reservation %s to spent: %w", r.id, err)
	}
	return &settled{provider: r.provider, model: r.model, outcome: outcome, used: used, cost: cost}, nil
}

func (s *Service) count(d *settled) {
	if d == nil {
		return
	}
	s.opts.Metrics.Settled(d.provider, d.model, d.outcome, [4]int64{d.used.Input, d.used.Output, d.used.CacheRead, d.used.CacheWrite}, d.cost)
}

// SweepLoop settles, every minute, the reservations nobody settled within
// SweepAge (their runner died with the call, or never reached the server
// again) to their worst case. Every replica runs it; SKIP LOCKED shares
// the work.
func (s *Service) SweepLoop(ctx context.Context) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Warn("model reservation sweep failed", "err", err)
		} else if n > 0 {
			s.opts.Log.Info("unsettled model reservations settled to their worst case", "reservations", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep settles the reservations older than SweepAge, in batches; it
// returns how many it settled.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		var done []*settled
		err := store.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			done = nil
			rows, err := tx.Query(ctx, `SELECT id FROM model_reservations WHERE settled_at IS NULL AND created_at < now() - $1::interval
				ORDER BY created_at LIMIT 100 FOR UPDATE SKIP LOCKED`, SweepAge)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			for _, id := range ids {
				r, found, err := lockReservation(ctx, tx, id)
				if err != nil || !found {
					return err
				}
				d, err := settleTx(ctx, tx, r, usedOf(r, nil, false), "swept")
				if err != nil {
					return err
				}
				done = append(done, d)
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		for _, d := range done {
			s.count(d)
		}
		total += len(done)
		if len(done) < 100 {
			return total, nil
		}
	}
}
