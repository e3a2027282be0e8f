package approvals

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// After an approval commits, the server's own handlers of its kind run
// (an admin command replayed with its grant, a registration carried out):
// once from the resolving replica, or from the recovery loop on any
// replica if that one stopped first.

// runApproved runs the kind's approved handlers after commit, each isolated:
// an error or a panic is logged and the next handler still runs. Then the
// hold is marked dispatched (the recovery loop skips it).
func (s *Service) runApproved(ctx context.Context, h *guardv1.Hold) {
	ctx = context.WithoutCancel(ctx)
	handlers := s.approvedHandlers(h.Kind)
	if len(handlers) == 0 {
		return
	}
	retry := false
	for _, fn := range handlers {
		func() {
			hctx, cancel := context.WithTimeout(ctx, s.HandlerTimeout)
			defer cancel()
			defer func() {
				if p := recover(); p != nil {
					s.log.Error("approved handler panicked", "hold", h.Id, "kind", h.Kind, "panic", fmt.Sprint(p))
				}
			}()
			switch err := fn(hctx, h); {
			case errors.Is(err, ErrRetryLater):
				retry = true
				s.log.Warn("approved handler could not run now; it will be dispatched again", "hold", h.Id, "kind", h.Kind, "err", err)
			case err != nil:
				s.log.Error("approved handler failed", "hold", h.Id, "kind", h.Kind, "err", err)
			}
		}()
	}
	if retry {
		s.dispatchLater(ctx, h)
		return
	}
	if _, err := s.pool.Exec(ctx, sqlDispatched, h.Id); err != nil {
		s.log.Warn("marking an approved hold dispatched failed; the recovery loop may run its handlers again", "hold", h.Id, "err", err)
	}
}

// ErrRetryLater is what an approved handler returns when it could not run
// now and did nothing (the guard could not decide its replay: the grant is
// unused). The hold is dispatched again after a back-off, up to
// MaxDispatchAttempts; then the approvers and the requester are told why not.
var ErrRetryLater = errors.New("could not run now; nothing was done")

// MaxDispatchAttempts bounds the retries of a server-run replay.
const MaxDispatchAttempts = 8

// dispatchLater releases the hold for the recovery loop after a back-off
// (10 s doubling), or gives up past MaxDispatchAttempts. If the database is
// unreachable too, the hold stays claimed-undispatched as it was, and the
// next attempt waits for DispatchGrace.
func (s *Service) dispatchLater(ctx context.Context, h *guardv1.Hold) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var attempts int
		err := tx.QueryRow(ctx, sqlRedispatchLater, h.Id).Scan(&attempts)
		if err != nil {
			return err
		}
		if attempts < MaxDispatchAttempts {
			return nil
		}
		if _, err := tx.Exec(ctx, sqlDispatchGivenUp, h.Id); err != nil {
			return err
		}
		return s.giveUpTx(ctx, tx, h, fmt.Sprintf("the guard could not decide its replay in %d attempts", attempts))
	})
	if err != nil {
		s.log.Error("could not schedule the approved hold's next dispatch", "hold", h.Id, "err", err)
	}
}

// DispatchMissed runs the handlers of approved holds whose resolving
// replica stopped between the commit and its handlers (dispatched_at still
// NULL DispatchGrace after the approval). Each hold is claimed first (one
// conditional UPDATE, so one replica runs it), then its handlers run: at
// most once from here. Handlers must tolerate running late; the guard's
// replay re-checks everything live and consumes the grant once.
func (s *Service) DispatchMissed(ctx context.Context) (int, error) {
	kinds := s.handlerKinds()
	if len(kinds) == 0 {
		return 0, nil
	}
	rows, err := s.pool.Query(ctx, sqlClaimUndispatched+holdColumns, kinds, s.DispatchGrace.Seconds())
	if err != nil {
		return 0, fmt.Errorf("claim undispatched holds: %w", err)
	}
	holds, err := pgx.CollectRows(rows, holdFromRow)
	if err != nil {
		return 0, fmt.Errorf("claim undispatched holds: %w", err)
	}
	for _, h := range holds {
		s.log.Warn("running the handlers of an approval its replica never dispatched", "hold", h.Id, "kind", h.Kind)
		s.runApproved(ctx, h)
	}
	return len(holds), nil
}
