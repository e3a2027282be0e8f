package approvals

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
)

// "Reject with reason…": the hold awaits the approver's next direct
// message as the reason (inbound captures it and rejects through Resolve);
// no reason within ReasonWait rejects it without one.

// armReasonCaptureTx marks the hold as awaiting the clicker's reason and
// clears any other capture of theirs (one per approver: their next direct
// message can only be one reason).
func armReasonCaptureTx(ctx context.Context, tx pgx.Tx, holdID, clicker string) (*guardv1.Hold, error) {
	if _, err := tx.Exec(ctx, sqlClearOtherCaptures, clicker, holdID); err != nil {
		return nil, fmt.Errorf("clear earlier reason captures of %s: %w", clicker, err)
	}
	h, err := readHold(ctx, tx, sqlArmReason+holdColumns, holdID, clicker)
	if err != nil {
		return nil, fmt.Errorf("arm reason capture on %s: %w", holdID, err)
	}
	return h, nil
}

// LapseReasonCaptures rejects, without a reason, the holds whose approver
// picked "Reject with reason…" more than ReasonWait ago and never sent it
// (the seed's sweep of a ghosting admin): the reject goes through Resolve
// as that approver, so a role revoked meanwhile only ends the capture and
// leaves the hold to the others. It returns how many it rejected.
func (s *Service) LapseReasonCaptures(ctx context.Context) (int, error) {
	if s.ReasonWait <= 0 {
		return 0, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, awaiting_reason_from FROM holds
		WHERE status = 'pending' AND awaiting_reason_from <> '' AND awaiting_reason_at < now() - make_interval(secs => $1)
		ORDER BY awaiting_reason_at LIMIT 100`, s.ReasonWait.Seconds())
	if err != nil {
		return 0, fmt.Errorf("lapsed reason captures: %w", err)
	}
	type capture struct{ hold, user string }
	lapsed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (capture, error) {
		var c capture
		return c, r.Scan(&c.hold, &c.user)
	})
	if err != nil {
		return 0, fmt.Errorf("lapsed reason captures: %w", err)
	}
	n := 0
	for _, c := range lapsed {
		_, err := s.Resolve(ctx, Resolution{HoldID: c.hold, Outcome: guardv1.Outcome_OUTCOME_REJECT, Clicker: c.user})
		switch {
		case err == nil:
			n++
			s.log.Info("no reject reason came in time; rejected without one", "hold", c.hold, "approver", c.user)
		case fault.Is(err, fault.Denied), fault.Is(err, fault.Precondition), fault.Is(err, fault.NotFound):
			if _, err := s.DisarmReasonCapture(ctx, c.hold, c.user); err != nil {
				return n, err
			}
		default:
			return n, err
		}
	}
	return n, nil
}

// DisarmReasonCapture ends clicker's capture on a hold (their reason was
// refused: role revoked, hold gone). It reports whether one was armed.
func (s *Service) DisarmReasonCapture(ctx context.Context, holdID, clicker string) (bool, error) {
	tag, err := s.pool.Exec(ctx, sqlDisarmReason, holdID, clicker)
	if err != nil {
		return false, fmt.Errorf("disarm reason capture on %s: %w", holdID, err)
	}
	return tag.RowsAffected() > 0, nil
}
