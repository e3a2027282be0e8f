package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/wake"
)

// A click on a hold is a pipeline, one way through, as a decision is
// (guard.Engine.Decide): the request checked (checkClick) → what its rules
// need read in one batch under the hold's lock (readResolution) → the
// rules judged with no I/O (checkResolution, resolvecheck.go) → the
// transition the verdict names (record) → after the commit, the audit
// line, the metrics and the approved handlers (afterResolution).

// Resolution is one click on a hold.
type Resolution struct {
	HoldID  string
	Outcome guardv1.Outcome // APPROVE or REJECT
	Clicker string          // the namespaced user who clicked
	Reason  string          // reject only
	Choice  string          // the option value, for multi-option cards
	Channel string          // where the click came from (metrics): console, telegram, ncl, …
	// SteppedUp: the clicker proved who they are just now — their own
	// token (ncl, the operator), or a console sign-in within the step-up
	// window — not a tap in chat. A hold that needs a step-up
	// (Hold.step_up, holdRow.proto) is approved only so.
	SteppedUp bool
	// Standing: approve as a standing grant (for a time or the session)
	// instead of once; approve only.
	Standing Standing
	// ChatTap: the click is a bridge's assertion of a chat user (a tap in
	// chat, a Slack form), which approves once and never stands.
	ChatTap bool
}

func (r Resolution) approves() bool { return r.Outcome == guardv1.Outcome_OUTCOME_APPROVE }

// StepUpWindow is how recent a console sign-in must be to approve a hold
// that needs a step-up.
const StepUpWindow = 10 * time.Minute

// Resolve applies a click: mayResolve decides who may; the resolution is one
// conditional UPDATE (a second resolve is FailedPrecondition, never a second
// execution); the resolved event, the runner replay of a delivery-action
// hold and the requester's notice commit with it. Approved handlers run
// after the commit. Errors are faults (api.Status maps them).
func (s *Service) Resolve(ctx context.Context, r Resolution) (*guardv1.Hold, error) {
	h, _, err := s.ResolveStanding(ctx, r)
	return h, err
}

// resolved is what a click did.
type resolved struct {
	hold     *guardv1.Hold
	armed    bool // a reason capture was armed: the hold is still pending
	partial  bool // one approval of several was recorded: still pending
	standing *guardv1.StandingGrant
}

// ResolveStanding is Resolve that also answers the standing grant the
// click made (nil unless it approved the hold with r.Standing, by quorum).
func (s *Service) ResolveStanding(ctx context.Context, r Resolution) (_ *guardv1.Hold, _ *guardv1.StandingGrant, err error) {
	defer store.Faulted(&err, "hold")
	if err := checkClick(r, s.cfg.StandingGrantMax); err != nil {
		return nil, nil, err
	}
	var res resolved
	// Keyed: every statement of a resolution reads or writes by key (or,
	// clearing other reason captures, through a partial index whose
	// predicate the statement states). Its event and push wake their
	// readers after the commit, not inside it (package wake).
	ctx, woken := wake.With(ctx)
	err = pgx.BeginTxFunc(ctx, s.pool, wake.KeyedTx, func(tx pgx.Tx) error {
		rd, err := s.readResolution(ctx, tx, r)
		if err != nil {
			return err
		}
		v, err := checkResolution(r, rd, time.Now())
		if err != nil {
			return err
		}
		if v.captor != "" {
			// Another approver's reason capture holds the click off only
			// while they may still resolve the hold.
			roles, err := LoadRoles(ctx, tx, v.captor)
			if err != nil {
				return err
			}
			if err := captureHolds(rd.hold, v.captor, roles); err != nil {
				return err
			}
		}
		res, err = s.record(ctx, tx, r, rd, v)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	woken.Send(ctx, s.pool, s.log)
	s.afterResolution(ctx, r, res)
	return res.hold, res.standing, nil
}

// resolveReading is what a click's rules need, read under the hold's lock.
type resolveReading struct {
	hold  *guardv1.Hold
	roles Roles // the clicker's
	// target is the hold's session, locked as pushes.EnqueueTx locks it,
	// when the resolution will push to it (a reject's notice, an approved
	// delivery action's replay); nil otherwise, or without a session.
	target *pushes.Target
	// frozenBy is who froze the hold's agent ("" when nobody did); read
	// for an approval only.
	frozenBy string
}

// readResolution reads, in one round trip, the hold (locked first, as
// everywhere), the clicker's roles (the click rule's, mayresolve.go), the
// session the resolution would push to (pushes') and, for an approval, who
// froze the hold's agent (the guard's freeze rule).
func (s *Service) readResolution(ctx context.Context, tx pgx.Tx, r Resolution) (resolveReading, error) {
	var rd resolveReading
	b := &pgx.Batch{}
	b.Queue(`SELECT `+holdColumns+` FROM holds WHERE id = $1 FOR UPDATE`, r.HoldID).Query(func(rows pgx.Rows) error {
		h, err := pgx.CollectOneRow(rows, holdFromRow)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.New(fault.NotFound, "hold %s not found", r.HoldID)
		}
		if err != nil {
			return fmt.Errorf("read hold: %w", err)
		}
		rd.hold = h
		return nil
	})
	b.Queue(rolesQuery, r.Clicker).Query(func(rows pgx.Rows) (err error) {
		rd.roles, err = scanRoles(rows, r.Clicker)
		return err
	})
	pushes.QueueLockTarget(b, &rd.target, `SELECT session_id FROM holds WHERE id = $1 AND ($2 OR delivery_action <> '')`,
		r.HoldID, r.Outcome == guardv1.Outcome_OUTCOME_REJECT)
	if r.approves() {
		b.Queue(sqlFrozenForHold, r.HoldID).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&rd.frozenBy); err != nil {
				return fmt.Errorf("read freezes: %w", err)
			}
			return nil
		})
	}
	return rd, tx.SendBatch(ctx, b).Close()
}

// sqlFrozenForHold is who froze the agent of hold $1 (guard.FreezeCovers:
// every agent, its group, or its session's runner): one row, "" when
// nobody did (or no such hold).
var sqlFrozenForHold = `SELECT COALESCE((SELECT f.frozen_by FROM freezes f, holds h
		WHERE h.id = $1 AND ` + guard.FreezeCovers("f.scope", "f.target", "COALESCE(h.agent_group_id, '')",
	"(SELECT runner_id FROM sessions WHERE id = NULLIF(h.session_id, ''))") + `
		ORDER BY f.frozen_at LIMIT 1), '')`

// record makes the transition the verdict names: a reason capture armed,
// one approval of several counted, or the hold resolved (with the standing
// grant its approval asked for).
func (s *Service) record(ctx context.Context, tx pgx.Tx, r Resolution, rd resolveReading, v resolveVerdict) (resolved, error) {
	cur := rd.hold
	switch v.step {
	case stepArmReason:
		h, err := armReasonCaptureTx(ctx, tx, r.HoldID, r.Clicker)
		return resolved{hold: h, armed: true}, err
	case stepCountApproval:
		// Quorum: the click counts once per user; the grant (the hold's
		// approval) exists only when the last needed approval lands.
		h, partial, err := s.approveTowardQuorumTx(ctx, tx, cur, r.Clicker, r.Standing)
		if err != nil || partial {
			return resolved{hold: h, partial: partial}, err
		}
	}
	hold, err := s.resolveTx(ctx, tx, r.HoldID, r.Outcome, r.Clicker, r.Reason, r.Choice, rd.target)
	if err != nil {
		return resolved{}, err
	}
	if hold == nil {
		return resolved{}, fault.New(fault.Precondition, "hold %s already resolved", r.HoldID)
	}
	res := resolved{hold: hold}
	if !r.approves() || !r.Standing.Wanted() {
		return res, nil
	}
	st, users := r.Standing, []string{r.Clicker}
	if cur.ApprovalsRequired > 1 {
		if st, users, err = standingOfQuorumTx(ctx, tx, cur.Id, s.cfg.StandingGrantMax); err != nil || !st.Wanted() {
			return res, err
		}
	}
	res.standing, err = s.createStandingTx(ctx, tx, hold, st, users)
	return res, err
}

// afterResolution is what follows a committed click: the audit lines and
// metrics, and an approval's handlers.
func (s *Service) afterResolution(ctx context.Context, r Resolution, res resolved) {
	switch {
	case res.armed:
		s.log.Info("reject reason awaited", "hold", res.hold.Id, "approver", r.Clicker)
		return
	case res.partial:
		return
	}
	s.observeResolved(res.hold, r.Outcome, r.Channel)
	if g := res.standing; g != nil {
		s.log.InfoContext(ctx, "standing grant given", "audit", true, "grant", g.GetId(), "hold", res.hold.Id,
			"approved_by", g.GetApprovedBy(), "until", g.GetExpiresAt().AsTime(), "session", g.GetSessionId())
	}
	if r.approves() {
		s.runApproved(ctx, res.hold)
	}
}

// resolveTx resolves a pending hold in tx: the conditional UPDATE, the
// resolved event and the session's push (replay on approve of a
// delivery-action hold, a notice on reject and expiry). It returns nil
// when the hold was not pending (someone else resolved it first).
//
// target, when the caller has locked the hold's session already
// (pushes.QueueLockTarget), lets the push go out with the event, in one
// round trip; without it the session is locked here.
func (s *Service) resolveTx(ctx context.Context, tx pgx.Tx, id string, outcome guardv1.Outcome, resolver, reason, choice string, target *pushes.Target) (*guardv1.Hold, error) {
	hold, held, err := resolveRowTx(ctx, tx, id, outcome, resolver, reason, choice, s.handlerKinds())
	if err != nil || hold == nil {
		return nil, err
	}
	var before []*pgx.QueuedQuery
	push, err := resolutionPush(ctx, tx, hold, outcome, reason)
	if err != nil {
		return nil, fmt.Errorf("resolve hold %s: %w", id, err)
	}
	if push != nil {
		stampReplay(ctx, push, held)
		if target != nil && target.SessionID == hold.SessionId {
			sql, args, err := target.Insert(push)
			if err != nil {
				return nil, fmt.Errorf("resolve hold %s: push to session: %w", id, err)
			}
			before = append(before, &pgx.QueuedQuery{SQL: sql, Arguments: args})
			if target.RunnerID != nil {
				wake.RunnerPushes(ctx, *target.RunnerID)
			}
		} else if _, err := pushes.EnqueueTx(ctx, tx, hold.SessionId, push); err != nil {
			return nil, fmt.Errorf("resolve hold %s: push to session: %w", id, err)
		}
	}
	// Last: the event's cursor is in flight from here to commit.
	_, outcomeWord, _ := resolutionWords(outcome) // resolveRowTx checked it
	if err := insertEventTx(ctx, tx, hold, "resolved", outcomeWord, resolver, false, before...); err != nil {
		return nil, err
	}
	return hold, nil
}

func (s *Service) observeResolved(h *guardv1.Hold, outcome guardv1.Outcome, channel string) {
	waited := time.Duration(0)
	if h.CreatedAt != nil && h.ResolvedAt != nil {
		waited = h.ResolvedAt.AsTime().Sub(h.CreatedAt.AsTime())
	}
	if channel == "" {
		channel = "unknown"
	}
	s.metrics.ObserveResolved(h.Kind, enumword.String(outcome), channel, waited)
	// Audit, after the commit (expire and sweep have no resolver).
	effect := "deny"
	if outcome == guardv1.Outcome_OUTCOME_APPROVE {
		effect = "allow"
	}
	s.log.Info("hold resolved", "audit", true, "hold", h.Id, "title", h.Title, "kind", h.Kind, "group", h.AgentGroupId,
		"outcome", enumword.String(outcome), "effect", effect, "resolver", h.Resolver, "reason", h.Reason, "waited", waited)
}
