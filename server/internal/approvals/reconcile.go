package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
)

// MaxReplayAttempts is how often the reconciler re-sends an approved hold's
// replay before it gives up and tells the requester and the approvers why.
const MaxReplayAttempts = 5

// reconcileBatch bounds the holds one reconcile transaction claims.
const reconcileBatch = 50

// ReconcileReplays finds approved delivery-action holds whose action was not
// applied (the grant unused, or consumed by a decision never applied) and
// whose replay is not in flight (no unacknowledged replay push), untouched
// for grace, and for each: gives up when a replay of it was denied (the
// baseline no longer holds — D3) or it was re-sent MaxReplayAttempts times,
// else re-enqueues the replay. Every replica runs it: holds are claimed with
// FOR UPDATE SKIP LOCKED, and the push commits with the claim. Giving up is
// never silent: the hold records unapplied_reason (Approvals.Get/List show
// it) and the requesting session gets a FAILED notice saying why.
func (s *Service) ReconcileReplays(ctx context.Context, grace time.Duration) (resent, gaveUp int, err error) {
	for {
		var n, r, g int
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			list, err := claimUnappliedTx(ctx, tx, grace)
			if err != nil {
				return err
			}
			n = len(list)
			for _, c := range list {
				// The claim's statement may have started before another
				// replica committed a re-send of this hold (its row lock is
				// released by then, and the recheck of a locked row does not
				// re-run the NOT EXISTS): look again with a fresh snapshot
				// now that the row lock is ours.
				var still bool
				if err := tx.QueryRow(ctx, `SELECT applied_at IS NULL AND unapplied_at IS NULL
					AND NOT EXISTS (SELECT 1 FROM runner_pushes p WHERE p.hold_id = holds.id AND p.acked_at IS NULL)
					FROM holds WHERE id = $1`, c.hold.Id).Scan(&still); err != nil {
					return fmt.Errorf("recheck unapplied approval %s: %w", c.hold.Id, err)
				}
				if !still {
					continue
				}
				if why := c.givenUp(); why != "" {
					if err := s.giveUpTx(ctx, tx, c.hold, why); err != nil {
						return err
					}
					g++
					continue
				}
				sent, err := s.resendReplayTx(ctx, tx, c)
				if err != nil {
					return err
				}
				if sent {
					r++
				} else {
					g++
				}
			}
			return nil
		})
		if err != nil {
			return resent, gaveUp, err
		}
		resent, gaveUp = resent+r, gaveUp+g
		if n < reconcileBatch {
			return resent, gaveUp, nil
		}
	}
}

// unapplied is an approved hold whose action was not applied, as the
// reconciler claims it: how often its replay was sent, why the last one
// was denied and why its last push failed ("" when none).
type unapplied struct {
	hold               *guardv1.Hold
	attempts           int
	denied, lastFailed string
}

// claimUnappliedTx claims, FOR UPDATE SKIP LOCKED, up to reconcileBatch
// approved delivery-action holds untouched for grace, neither applied nor
// given up, with no replay push in flight.
func claimUnappliedTx(ctx context.Context, tx pgx.Tx, grace time.Duration) ([]unapplied, error) {
	rows, err := tx.Query(ctx, `SELECT `+holdColumns+`, replay_attempts,
		COALESCE((SELECT d.reason FROM decisions d
		          WHERE d.grant_id = holds.id AND d.session_id = holds.session_id AND d.effect = 'deny' AND d.at >= holds.resolved_at
		          ORDER BY d.at DESC LIMIT 1), '') AS denied_reason,
		COALESCE((SELECT p.last_error FROM runner_pushes p WHERE p.hold_id = holds.id ORDER BY p.created_at DESC, p.seq DESC LIMIT 1), '') AS last_push_error
		FROM holds
		WHERE status = 'approved' AND delivery_action <> '' AND session_id IS NOT NULL
		  AND applied_at IS NULL AND unapplied_at IS NULL
		  AND COALESCE(replay_checked_at, resolved_at) <= now() - make_interval(secs => $1)
		  AND NOT EXISTS (SELECT 1 FROM runner_pushes p WHERE p.hold_id = holds.id AND p.acked_at IS NULL)
		ORDER BY resolved_at LIMIT $2 FOR UPDATE SKIP LOCKED`, grace.Seconds(), reconcileBatch)
	if err != nil {
		return nil, fmt.Errorf("find unapplied approvals: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (unapplied, error) {
		r, err := pgx.RowToStructByName[struct {
			holdRow
			Attempts      int    `db:"replay_attempts"`
			DeniedReason  string `db:"denied_reason"`
			LastPushError string `db:"last_push_error"`
		}](row)
		if err != nil {
			return unapplied{}, err
		}
		h, err := r.proto()
		return unapplied{hold: h, attempts: r.Attempts, denied: r.DeniedReason, lastFailed: r.LastPushError}, err
	})
	if err != nil {
		return nil, fmt.Errorf("find unapplied approvals: %w", err)
	}
	return list, nil
}

// givenUp is why the reconciler gives c up ("" when it re-sends the
// replay): a replay the live baseline denied (D3), or attempts run out.
func (c unapplied) givenUp() string {
	switch {
	case c.denied != "" && !c.hold.Consumed:
		return "the replay was denied: " + c.denied
	case c.attempts >= MaxReplayAttempts:
		why := fmt.Sprintf("not applied after %d attempts", c.attempts+1)
		if c.lastFailed != "" {
			why += ": " + c.lastFailed
		}
		return why
	}
	return ""
}

// resendReplayTx counts and re-sends c's replay; false when its session
// is gone, and it was given up instead.
func (s *Service) resendReplayTx(ctx context.Context, tx pgx.Tx, c unapplied) (bool, error) {
	if _, err := tx.Exec(ctx, sqlCountReplay, c.hold.Id); err != nil {
		return false, fmt.Errorf("count replay of %s: %w", c.hold.Id, err)
	}
	push, err := replayPush(ctx, tx, c.hold)
	if err != nil {
		return false, fmt.Errorf("re-send replay of %s: %w", c.hold.Id, err)
	}
	if err := traceReplay(ctx, tx, push); err != nil {
		return false, fmt.Errorf("re-send replay of %s: %w", c.hold.Id, err)
	}
	if _, err := pushes.EnqueueTx(ctx, tx, c.hold.SessionId, push); err != nil {
		if errors.Is(err, pushes.ErrNoSession) {
			return false, s.giveUpTx(ctx, tx, c.hold, "its session no longer exists")
		}
		return false, fmt.Errorf("re-send replay of %s: %w", c.hold.Id, err)
	}
	s.log.Warn("re-sending the replay of an approved hold that was not applied", "hold", c.hold.Id, "kind", c.hold.Kind, "attempt", c.attempts+1)
	return true, nil
}

// giveUpTx records that an approved hold will not be applied and tells the
// requesting session and the approvers (an unapplied event) why.
func (s *Service) giveUpTx(ctx context.Context, tx pgx.Tx, h *guardv1.Hold, why string) error {
	if _, err := tx.Exec(ctx, sqlUnapplied, h.Id, why); err != nil {
		return fmt.Errorf("record unapplied hold %s: %w", h.Id, err)
	}
	s.log.Warn("approved hold not applied; giving up", "hold", h.Id, "kind", h.Kind, "why", why)
	// The approvers hear it where they heard of the hold (Watch, webhook).
	cur, err := GetHold(ctx, tx, h.Id)
	if err != nil {
		return fmt.Errorf("re-read unapplied hold %s: %w", h.Id, err)
	}
	what := h.Kind
	if h.Title != "" {
		what = h.Kind + " (" + h.Title + ")"
	}
	_, err = pushes.EnqueueTx(ctx, tx, h.SessionId, &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
		Kind: guardv1.NoticeKind_NOTICE_KIND_FAILED, HoldId: h.Id,
		Text: fmt.Sprintf("Your approved %s request was not carried out: %s.", what, why),
	}}})
	if err != nil && !errors.Is(err, pushes.ErrNoSession) {
		return fmt.Errorf("notify requester of unapplied hold %s: %w", h.Id, err)
	}
	// Last: the event's cursor is in flight from here to commit.
	return insertEventTx(ctx, tx, cur, "unapplied", "", "", false)
}

func (s *Service) reconcileTick(ctx context.Context) error {
	_, _, err := s.ReconcileReplays(ctx, s.ReplayGrace)
	return err
}
