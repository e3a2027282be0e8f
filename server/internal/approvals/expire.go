package approvals

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ExpireDue resolves pending holds past their expiry with outcome expire.
// Every replica runs it; the conditional UPDATE (and SKIP LOCKED) make
// concurrent runs resolve each hold once. It returns how many it expired.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	return s.resolveWhere(ctx, `status = 'pending' AND expires_at <= now()`, nil, guardv1.Outcome_OUTCOME_EXPIRE)
}

// SweepOnStart resolves pending holds marked swept_on_restart (credential
// holds: their waiting gateway died with the old process) created before
// this process started, with outcome sweep.
func (s *Service) SweepOnStart(ctx context.Context) (int, error) {
	return s.resolveWhere(ctx, `status = 'pending' AND swept_on_restart AND created_at < $1`, []any{s.startedAt}, guardv1.Outcome_OUTCOME_SWEEP)
}

// resolveBatch is how many holds one expiry or sweep transaction resolves.
// Each event is inserted under a savepoint (insertEvent), and a transaction
// of more than 64 subtransactions overflows their cache, which slows every
// snapshot the cluster takes while it runs: 50 stay below.
const resolveBatch = 50

func (s *Service) resolveWhere(ctx context.Context, where string, args []any, outcome guardv1.Outcome) (int, error) {
	total := 0
	for {
		var resolved []*guardv1.Hold
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id FROM holds WHERE `+where+` ORDER BY created_at LIMIT $`+fmt.Sprint(len(args)+1)+` FOR UPDATE SKIP LOCKED`,
				append(args, resolveBatch)...)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			resolved = resolved[:0]
			for _, id := range ids {
				h, err := s.resolveTx(ctx, tx, id, outcome, "", "", "", nil)
				if err != nil {
					return err
				}
				if h != nil {
					resolved = append(resolved, h)
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("%s holds: %w", enumword.String(outcome), err)
		}
		for _, h := range resolved {
			s.observeResolved(h, outcome, "expiry")
		}
		total += len(resolved)
		if len(resolved) < resolveBatch {
			return total, nil
		}
	}
}
