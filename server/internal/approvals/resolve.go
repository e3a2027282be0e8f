package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/server/internal/pushes"
)

// MaxReasonChars bounds a reject reason (it is relayed to the requester).
const MaxReasonChars = 280

// ChoiceRejectWithReason is the default card's "Reject with reason…" option.
const ChoiceRejectWithReason = "reject_with_reason"

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

// StepUpWindow is how recent a console sign-in must be to approve a hold
// that needs a step-up.
const StepUpWindow = 10 * time.Minute

// Resolve applies a click: mayResolve decides who may; the resolution is one
// conditional UPDATE (a second resolve is FailedPrecondition, never a second
// execution); the resolved event, the runner replay of a delivery-action
// hold and the requester's notice commit with it. Approved handlers run
// after the commit. Errors are gRPC statuses.
func (s *Service) Resolve(ctx context.Context, r Resolution) (*guardv1.Hold, error) {
	h, _, err := s.ResolveStanding(ctx, r)
	return h, err
}

// ResolveStanding is Resolve that also answers the standing grant the
// click made (nil unless it approved the hold with r.Standing, by quorum).
func (s *Service) ResolveStanding(ctx context.Context, r Resolution) (_ *guardv1.Hold, _ *guardv1.StandingGrant, err error) {
	defer store.Faulted(&err, "hold")
	if err := s.checkStandingRequest(r); err != nil {
		return nil, nil, err
	}
	switch r.Outcome {
	case guardv1.Outcome_OUTCOME_APPROVE:
		if r.Reason != "" {
			return nil, nil, fault.New(fault.Invalid, "reason: only a reject carries a reason")
		}
	case guardv1.Outcome_OUTCOME_REJECT:
	default:
		return nil, nil, fault.New(fault.Invalid, "outcome: want APPROVE or REJECT")
	}
	if n := utf8.RuneCountInString(r.Reason); n > MaxReasonChars {
		return nil, nil, fault.New(fault.Invalid, "reason: %d characters, at most %d", n, MaxReasonChars)
	}
	if r.Clicker == "" {
		return nil, nil, fault.New(fault.Invalid, "clicker: a resolving user is required")
	}
	var (
		hold     *guardv1.Hold
		partial  bool
		standing *guardv1.StandingGrant
	)
	armed := false
	// Keyed: every statement of a resolution reads or writes by key (or,
	// clearing other reason captures, through a partial index whose
	// predicate the statement states).
	err = pgx.BeginTxFunc(ctx, s.pool, store.KeyedTx, func(tx pgx.Tx) error {
		// The hold (locked), the clicker's roles and, when the resolution
		// will push to the hold's session (a reject's notice, an approved
		// delivery action's replay: resolutionPush), that session, locked
		// as pushes.LockTargetSQL does, in one round trip. The hold is
		// locked first, as everywhere.
		batch := &pgx.Batch{}
		batch.Queue(`SELECT `+holdColumns+` FROM holds WHERE id = $1 FOR UPDATE`, r.HoldID)
		batch.Queue(rolesQuery, r.Clicker)
		batch.Queue(`SELECT runner_id, agent_group_id, id FROM sessions
			WHERE id = (SELECT session_id FROM holds WHERE id = $1 AND ($2 OR delivery_action <> '')) FOR SHARE`,
			r.HoldID, r.Outcome == guardv1.Outcome_OUTCOME_REJECT)
		// An approval also needs who froze the hold's agent, if anyone.
		approve := r.Outcome == guardv1.Outcome_OUTCOME_APPROVE
		if approve {
			batch.Queue(sqlFrozenForHold, r.HoldID)
		}
		br := tx.SendBatch(ctx, batch)
		cur, err := func() (*guardv1.Hold, error) {
			rows, err := br.Query()
			if err != nil {
				return nil, err
			}
			return pgx.CollectOneRow(rows, holdFromRow)
		}()
		if err != nil {
			br.Close()
			if errors.Is(err, pgx.ErrNoRows) {
				return fault.New(fault.NotFound, "hold %s not found", r.HoldID)
			}
			return fmt.Errorf("read hold: %w", err)
		}
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return fmt.Errorf("read roles of %s: %w", r.Clicker, err)
		}
		roles, err := scanRoles(rows, r.Clicker)
		var (
			target   *pushes.Target
			frozenBy string
		)
		if err == nil {
			target, err = scanTarget(br)
		}
		if err == nil && approve {
			if err = br.QueryRow().Scan(&frozenBy); err != nil {
				err = fmt.Errorf("read freezes: %w", err)
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if !MayResolveWithRoles(cur.ApproverRule, cur.ApproverScope, r.Clicker, roles) {
			return fault.New(fault.Denied, "%s may not resolve hold %s", r.Clicker, r.HoldID)
		}
		if cur.Status != guardv1.HoldStatus_HOLD_STATUS_PENDING {
			return fault.New(fault.Precondition, "hold %s already resolved (%s)", r.HoldID, enumword.String(cur.Status))
		}
		if cur.ExpiresAt != nil && !cur.ExpiresAt.AsTime().After(time.Now()) {
			return fault.New(fault.Precondition, "hold %s has expired", r.HoldID)
		}
		// cur.StepUp is read with the locking read (holdColumns'
		// step_up_marked and the kind's rule: holdRow.proto).
		if approve && !r.SteppedUp && cur.GetStepUp() {
			return fault.New(fault.Precondition, "hold %s needs a step-up: a tap in chat cannot approve it; approve it in the console after signing in again (or with your own token, ncl)", r.HoldID)
		}
		if approve && frozenBy != "" {
			// A frozen scope's holds stay pending: approved, their replay
			// would only be denied (the freeze is always enforced).
			return fault.New(fault.Precondition, "hold %s is of a frozen agent (frozen by %s): it stays pending until the freeze is lifted", r.HoldID, frozenBy)
		}
		if r.Standing.Wanted() {
			if why := standingRefusal(cur, r.Standing); why != "" {
				return fault.New(fault.Precondition, "hold %s cannot be approved as a standing grant: %s", r.HoldID, why)
			}
		}
		if r.Choice != "" && !hasOption(cur, r.Choice) {
			return fault.New(fault.Invalid, "choice: %q is not an option of hold %s", r.Choice, r.HoldID)
		}
		if cur.AwaitingReasonFrom != "" && cur.AwaitingReasonFrom != r.Clicker {
			// The capture holds the others off only while its approver may
			// still resolve the hold (a role revoked since ends it).
			still, err := MayResolve(ctx, tx, cur.ApproverRule, cur.ApproverScope, cur.AwaitingReasonFrom)
			if err != nil {
				return err
			}
			if still {
				return fault.New(fault.Precondition, "hold %s awaits a reject reason from %s", r.HoldID, cur.AwaitingReasonFrom)
			}
		}
		if armsReasonCapture(cur, r) {
			hold, err = armReasonCaptureTx(ctx, tx, r.HoldID, r.Clicker)
			armed = true
			return err
		}
		if r.Outcome == guardv1.Outcome_OUTCOME_APPROVE && cur.ApprovalsRequired > 1 {
			// Quorum: the click counts once per user; the grant (the hold's
			// approval) exists only when the last needed approval lands.
			if hold, partial, err = s.approveTowardQuorumTx(ctx, tx, cur, r.Clicker, r.Standing); err != nil || partial {
				return err
			}
		}
		hold, err = s.resolveTx(ctx, tx, r.HoldID, r.Outcome, r.Clicker, r.Reason, r.Choice, target)
		if err != nil {
			return err
		}
		if hold == nil {
			return fault.New(fault.Precondition, "hold %s already resolved", r.HoldID)
		}
		if r.Outcome != guardv1.Outcome_OUTCOME_APPROVE || !r.Standing.Wanted() {
			return nil
		}
		st, users := r.Standing, []string{r.Clicker}
		if cur.ApprovalsRequired > 1 {
			if st, users, err = standingOfQuorumTx(ctx, tx, cur.Id, s.cfg.StandingGrantMax); err != nil || !st.Wanted() {
				return err
			}
		}
		standing, err = s.createStandingTx(ctx, tx, hold, st, users)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if armed {
		s.log.Info("reject reason awaited", "hold", hold.Id, "approver", r.Clicker)
		return hold, nil, nil
	}
	if partial {
		return hold, nil, nil
	}
	s.observeResolved(hold, r.Outcome, r.Channel)
	if standing != nil {
		s.log.InfoContext(ctx, "standing grant given", "audit", true, "grant", standing.GetId(), "hold", hold.Id,
			"approved_by", standing.GetApprovedBy(), "until", standing.GetExpiresAt().AsTime(), "session", standing.GetSessionId())
	}
	if r.Outcome == guardv1.Outcome_OUTCOME_APPROVE {
		s.runApproved(ctx, hold)
	}
	return hold, standing, nil
}

// armsReasonCapture: "Reject with reason…" without the reason yet, on a hold
// with a session to tell (a sessionless hold has nobody to relay a reason
// to, so it is rejected at once, as in the seed).
func armsReasonCapture(cur *guardv1.Hold, r Resolution) bool {
	return r.Outcome == guardv1.Outcome_OUTCOME_REJECT && r.Choice == ChoiceRejectWithReason &&
		r.Reason == "" && cur.SessionId != ""
}

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

func hasOption(h *guardv1.Hold, v string) bool {
	for _, o := range h.Options {
		if o.GetValue() == v {
			return true
		}
	}
	return false
}

// resolveTx resolves a pending hold in tx: the conditional UPDATE, the
// resolved event and the session's push (replay on approve of a
// delivery-action hold, a notice on reject and expiry). It returns nil
// when the hold was not pending (someone else resolved it first).
//
// target, when the caller has locked the hold's session already
// (pushes.LockTargetSQL), lets the push go out with the event, in one round
// trip; without it the session is locked here.
func (s *Service) resolveTx(ctx context.Context, tx pgx.Tx, id string, outcome guardv1.Outcome, resolver, reason, choice string, target *pushes.Target) (*guardv1.Hold, error) {
	statusWord, outcomeWord, err := resolutionWords(outcome)
	if err != nil {
		return nil, fmt.Errorf("resolve hold %s: %w", id, err)
	}
	// An approval of a kind with no handlers is dispatched by its commit.
	// The hold's trace context comes back with it, for a replay push.
	rows, err := tx.Query(ctx, sqlResolve+holdColumns+`, trace_parent`, id, statusWord, resolver, reason, choice, s.handlerKinds())
	if err != nil {
		return nil, fmt.Errorf("resolve hold %s: %w", id, err)
	}
	var held string
	hold, err := pgx.CollectOneRow(rows, func(row pgx.CollectableRow) (*guardv1.Hold, error) {
		r, err := pgx.RowToStructByName[tracedHoldRow](row)
		if err != nil {
			return nil, err
		}
		held = r.TraceParent
		return r.proto()
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolve hold %s: %w", id, err)
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
		} else if _, err := pushes.EnqueueTx(ctx, tx, hold.SessionId, push); err != nil {
			return nil, fmt.Errorf("resolve hold %s: push to session: %w", id, err)
		}
	}
	// Last: the event's cursor is in flight from here to commit.
	if err := insertEventTx(ctx, tx, hold, "resolved", outcomeWord, resolver, false, before...); err != nil {
		return nil, err
	}
	return hold, nil
}

// scanTarget reads the hold's session as the resolution batch locked it
// (nil for a hold without one).
func scanTarget(br pgx.BatchResults) (*pushes.Target, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("lock the hold's session: %w", err)
	}
	targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pushes.Target, error) {
		var t pushes.Target
		return t, r.Scan(&t.RunnerID, &t.GroupID, &t.SessionID)
	})
	if err != nil || len(targets) == 0 {
		return nil, err
	}
	return &targets[0], nil
}

// resolutionPush is what tells the hold's session (if any) how it was
// resolved: the replay of an approved delivery-action hold, or a notice
// (nil: nothing to tell). Its words name who resolved it (words.go).
func resolutionPush(ctx context.Context, q store.Querier, hold *guardv1.Hold, outcome guardv1.Outcome, reason string) (*guardv1.Push, error) {
	if hold.SessionId == "" {
		return nil, nil
	}
	var push *guardv1.Push
	what := hold.Kind
	if hold.Title != "" {
		what = hold.Kind + " (" + hold.Title + ")"
	}
	switch outcome {
	case guardv1.Outcome_OUTCOME_APPROVE:
		switch {
		case hold.DeliveryAction != "":
			return replayPush(ctx, q, hold)
		case nextUseKinds[hold.Kind]:
			// Nothing is replayed: the agent is told to ask again.
			push = &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
				Kind: guardv1.NoticeKind_NOTICE_KIND_APPROVED, HoldId: hold.Id,
				Text: fmt.Sprintf("Your %s request was approved: make it again now to use the approval.", what),
			}}}
		}
	case guardv1.Outcome_OUTCOME_REJECT:
		seen, names, err := toldOf(ctx, q, hold)
		if err != nil {
			return nil, err
		}
		push = &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
			Kind: guardv1.NoticeKind_NOTICE_KIND_REJECTED, Text: holdview.Rejected(seen, names, reason), HoldId: hold.Id,
		}}}
	case guardv1.Outcome_OUTCOME_EXPIRE, guardv1.Outcome_OUTCOME_SWEEP:
		// No answer is a no: the request is denied and will not run.
		push = &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
			Kind: guardv1.NoticeKind_NOTICE_KIND_FAILED, Text: fmt.Sprintf("Your %s request expired without a decision: denied, it will not run.", what), HoldId: hold.Id,
		}}}
	}
	return push, nil
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
	s.log.Info("hold resolved", "audit", true, "hold", h.Id, "kind", h.Kind, "group", h.AgentGroupId,
		"outcome", enumword.String(outcome), "effect", effect, "resolver", h.Resolver, "reason", h.Reason, "waited", waited)
}

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

// replayPush asks the session's runner to replay an approved delivery action
// with the hold as its grant, telling it who approved what (words.go).
func replayPush(ctx context.Context, q store.Querier, h *guardv1.Hold) (*guardv1.Push, error) {
	seen, names, err := toldOf(ctx, q, h)
	if err != nil {
		return nil, err
	}
	return &guardv1.Push{Body: &guardv1.Push_Replay{Replay: &guardv1.ReplayAction{
		HoldId: h.Id, DeliveryAction: h.DeliveryAction, CatalogAction: h.CatalogAction, Payload: h.Payload,
		Resource: h.Resource, ApprovedBy: holdview.ApprovedBy(seen, names), Summary: holdview.Summary(seen, names),
	}}}, nil
}

// traceReplay stamps a replay push with the hold's trace context (the
// runner's replay continues the trace of the request that was held) and
// the approval's (which the replay links to); the approval's own span links
// to the hold's trace. Nothing for other pushes.
func traceReplay(ctx context.Context, q store.Querier, push *guardv1.Push) error {
	r := push.GetReplay()
	if r == nil {
		return nil
	}
	var held string
	if err := q.QueryRow(ctx, `SELECT trace_parent FROM holds WHERE id = $1`, r.GetHoldId()).Scan(&held); err != nil {
		return fmt.Errorf("read the hold's trace context: %w", err)
	}
	stampReplay(ctx, push, held)
	return nil
}

// stampReplay is traceReplay with the hold's trace context (held) already
// read. Nothing for other pushes.
func stampReplay(ctx context.Context, push *guardv1.Push, held string) {
	r := push.GetReplay()
	if r == nil {
		return
	}
	r.Traceparent, r.ApprovalTraceparent = held, telemetry.Traceparent(ctx)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		for _, l := range telemetry.Links(held) {
			span.AddLink(l)
		}
	}
}

// sqlFrozenForHold is who froze the agent of hold $1 (every agent, its
// group, or its session's runner): one row, "" when none did (or no such
// hold).
const sqlFrozenForHold = `SELECT COALESCE((SELECT f.frozen_by FROM freezes f, holds h
		WHERE h.id = $1
		  AND (f.scope = 'all'
		   OR (f.scope = 'group' AND f.target = COALESCE(h.agent_group_id, ''))
		   OR (f.scope = 'runner' AND f.target = (SELECT runner_id FROM sessions WHERE id = NULLIF(h.session_id, ''))))
		ORDER BY f.frozen_at LIMIT 1), '')`

// adminCommandKind is the hold kind of an agent's admin command
// (commands.ApprovalAction; approvals does not import the domain).
const adminCommandKind = "cli_command"
