package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	"github.com/clawguard/clawguard/server/internal/approvals"

	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/sessions"
)

// ApplyAction performs a mutation on an agent's behalf. The runner must own
// the session and cite a fresh, unused ALLOW decision for this session and
// action; the citation is consumed and the mutation made in one transaction
// (a failed mutation leaves the citation unused). The baseline is re-checked
// live in that transaction (D3 at apply): a stored answer, or an ALLOW
// decided before a revocation, is not applied past it.
//
// An ALLOW that consumed an approved hold's grant applies exactly that
// hold's payload, and only that decision can apply it. It is bound to the
// session, not to a runner: whichever runner hosts the session by then may
// cite it (a takeover runner finishes a dead runner's replay), past the
// citation window, until it has been applied once; citing it after that
// answers the recorded result and changes nothing. agentSession is the
// session the caller asserted with x-clawguard-session ("" when none).
func (s *Service) ApplyAction(ctx context.Context, runnerID, agentSession string, req *guardv1.ApplyActionRequest) (_ *guardv1.ApplyActionResponse, err error) {
	defer store.Faulted(&err, "action")
	switch {
	case req.GetSessionId() == "":
		return nil, fault.New(fault.Invalid, "session_id: required")
	case req.GetAction() == "":
		return nil, fault.New(fault.Invalid, "action: required")
	case req.GetDecisionId() == "" && req.GetGrant() == "":
		return nil, fault.New(fault.Invalid, "decision_id: required (a mutation must cite the ALLOW decision that authorized it, or name the approved hold it replays)")
	case agentSession != "" && agentSession != req.GetSessionId():
		return nil, fault.New(fault.Denied, "session_id %q is not the asserted agent session", req.GetSessionId())
	}
	a, ok := s.appliers[req.GetAction()]
	if !ok {
		return nil, fault.New(fault.Invalid, "action: %q is not applied through the registry (one of %s)", req.GetAction(), strings.Join(s.AppliedActions(), ", "))
	}
	if req.GetGrant() != "" {
		return s.applyGrant(ctx, runnerID, a, req)
	}
	var out Applied
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var sess Session
		var owner string
		// The session row is locked: a move to another runner waits for
		// this application (and this one sees a finished move).
		err := tx.QueryRow(ctx, `SELECT id, agent_group_id, COALESCE(runner_id, '') FROM sessions WHERE id = $1 FOR SHARE`, req.GetSessionId()).Scan(&sess.ID, &sess.GroupID, &owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
			return fault.New(fault.Denied, "runner %q does not host session %q", runnerID, req.GetSessionId())
		}
		if err != nil {
			return fmt.Errorf("read session: %w", err)
		}
		c, err := readCitationTx(ctx, tx, req.GetDecisionId(), sess.ID, req.GetAction(), s.opts.CitationWindow)
		if err != nil {
			return err
		}
		// The guard always holds such an action (self-modification), so a
		// genuine ALLOW for it consumed an approved hold — or was given by an
		// audit or warn mode (whether that mode still holds, recheckTx asks
		// the baseline).
		if c.grant == "" && c.mode == "" && c.standing == nil && a.AlwaysHeld {
			return fault.New(fault.Precondition, "citation refused: decision %q: a %s ALLOW must carry the grant of an approved hold, and this one has none", req.GetDecisionId(), req.GetAction())
		}
		if err := boundToDecision(a, c, req); err != nil {
			return err
		}
		if c.hold != nil && c.hold.applied {
			// Applied once already (perhaps by the session's previous
			// runner): the same answer, nothing changes.
			out = c.hold.result
			return nil
		}
		if err := s.recheckTx(ctx, tx, a, sess, runnerID, c, req); err != nil {
			return err
		}
		if out, err = a.Apply(ctx, tx, sess, req); err != nil {
			return err
		}
		if err := markAppliedTx(ctx, tx, c, out); err != nil {
			return err
		}
		return sessions.EventTx(ctx, tx, sess.ID, "out", "action", map[string]any{
			"action": req.GetAction(), "decision_id": req.GetDecisionId(), "result": out.Result,
		})
	})
	if err != nil {
		return nil, err
	}
	st, err := structpb.NewStruct(out.Result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return &guardv1.ApplyActionResponse{Result: st, Message: out.Message}, nil
}

// citation is a cited ALLOW decision, read and locked.
type citation struct {
	id, grant string
	mode      string        // the enforcement mode that relaxed a grantless ALLOW ("" = enforce)
	hold      *consumedHold // set when the decision consumed a hold's grant
	// standing is the standing grant a grantless ALLOW decided by "standing
	// grant" used (its payload and resource bind the application), re-checked
	// live in the applying transaction.
	standing *consumedHold
}

// approved is what the applied payload must equal: the consumed hold's or
// the standing grant's (nil: nothing approved, the decision's own).
func (c citation) approved() *consumedHold {
	if c.hold != nil {
		return c.hold
	}
	return c.standing
}

// consumedHold is the approved hold a grant-carrying ALLOW consumed.
type consumedHold struct {
	id   string
	what string // "hold" or "standing grant"
	// approvedBy: a standing grant's approvers, who must still be eligible
	// under the rule the baseline holds under at apply.
	approvedBy []string
	payload    map[string]any
	resource   map[string]string
	applied    bool
	result     Applied
}

// readCitationTx reads and locks the cited decision and, when it consumed
// a grant, the hold; it refuses (saying why) a decision that is missing,
// for another session or action, not an allow, a dry run, already cited or
// stale. A grant's consuming decision is exempt from single use and the
// window until its hold is applied (see ApplyAction); any other decision
// naming that grant is refused.
func readCitationTx(ctx context.Context, tx pgx.Tx, decisionID, sessionID, action string, window time.Duration) (citation, error) {
	var (
		effect, dAction, dSession, grant, mode string
		decidedBy, holdID                      string
		dryRun, cited, stale                   bool
	)
	key, keyArgs := store.DecisionKey(2, decisionID)
	err := tx.QueryRow(ctx, `SELECT effect, action, COALESCE(session_id, ''), dry_run, cited_at IS NOT NULL, at <= now() - $1::interval, grant_id, mode,
			decided_by, hold_id
		FROM decisions WHERE `+key+` FOR UPDATE`, append([]any{window}, keyArgs...)...).Scan(&effect, &dAction, &dSession, &dryRun, &cited, &stale, &grant, &mode, &decidedBy, &holdID)
	if errors.Is(err, pgx.ErrNoRows) {
		return citation{}, fault.New(fault.Precondition, "citation refused: decision %q not found", decisionID)
	}
	if err != nil {
		return citation{}, fmt.Errorf("read cited decision: %w", err)
	}
	refuse := func(why string) (citation, error) {
		return citation{}, fault.New(fault.Precondition, "citation refused: decision %q: %s", decisionID, why)
	}
	switch {
	case dSession != sessionID:
		return citation{}, fault.New(fault.Denied, "citation refused: decision %q was made for another session", decisionID)
	case effect != "allow":
		return refuse("it is a " + effect + ", not an allow")
	case dryRun:
		return refuse("it is a dry run")
	case dAction != action:
		return refuse(fmt.Sprintf("it authorized %q, not %q", dAction, action))
	}
	c := citation{id: decisionID, grant: grant, mode: mode}
	if grant == "" {
		switch {
		case cited:
			return refuse("it was already cited (single use)")
		case stale:
			return refuse(fmt.Sprintf("it is older than the citation window (%s)", window))
		}
		if decidedBy == guard.ByStanding && holdID != "" {
			// D3 at apply: the standing grant must still stand — not revoked,
			// not expired, its approvers still eligible.
			payload, resource, by, why, err := approvals.StandingForApplyTx(ctx, tx, holdID)
			if err != nil {
				return citation{}, err
			}
			if why != "" {
				return citation{}, fault.New(fault.Denied, "not applied: %s; decision %q no longer holds", why, decisionID)
			}
			c.standing = &consumedHold{id: holdID, what: "standing grant", payload: payload, resource: resource, approvedBy: by}
		}
		return c, nil
	}
	var (
		consumedBy      string
		payload, result []byte
		h               = &consumedHold{id: grant, what: "hold"}
	)
	err = tx.QueryRow(ctx, `SELECT COALESCE(consumed_by, ''), payload, resource, applied_at IS NOT NULL, applied_result
		FROM holds WHERE id = $1 FOR UPDATE`, grant).Scan(&consumedBy, &payload, &h.resource, &h.applied, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		return refuse(fmt.Sprintf("the hold %s it names no longer exists", grant))
	}
	if err != nil {
		return citation{}, fmt.Errorf("read approved hold %s: %w", grant, err)
	}
	if consumedBy != decisionID {
		return refuse(fmt.Sprintf("it did not consume hold %s; only the decision that consumed a hold applies its payload", grant))
	}
	if err := json.Unmarshal(payload, &h.payload); err != nil {
		return citation{}, fmt.Errorf("decode approved hold %s: %w", grant, err)
	}
	if h.applied && len(result) > 0 {
		if err := json.Unmarshal(result, &h.result); err != nil {
			return citation{}, fmt.Errorf("decode applied result of hold %s: %w", grant, err)
		}
	}
	c.hold = h
	return c, nil
}

// boundToDecision binds the applied payload to what was decided: a
// citation names session and action only, so without this a runner could
// cite an ALLOW and apply another payload. An ALLOW that consumed a grant
// applies exactly the approved hold's payload (plus the keys the runner
// stamps, such as a2a's message id) and resource.
func boundToDecision(a Applier, c citation, req *guardv1.ApplyActionRequest) error {
	if a.Resource != nil {
		if _, err := a.Resource(req); err != nil {
			return err
		}
	}
	h := c.approved()
	if h == nil {
		return nil
	}
	approved := h.payload
	b, err := req.GetPayload().MarshalJSON()
	if err != nil {
		return fault.New(fault.Invalid, "payload: %v", err)
	}
	got := map[string]any{}
	if err := json.Unmarshal(b, &got); err != nil {
		return fault.New(fault.Invalid, "payload: %v", err)
	}
	for _, k := range a.Stamped {
		if _, had := approved[k]; !had {
			delete(got, k)
		}
	}
	if approved == nil {
		approved = map[string]any{}
	}
	if !reflect.DeepEqual(approved, got) {
		return fault.New(fault.Denied, "payload differs from the one approved in %s %s", h.what, h.id)
	}
	if len(h.resource) > 0 && len(req.GetResource()) > 0 && !maps.Equal(h.resource, req.GetResource()) {
		return fault.New(fault.Denied, "resource differs from the one approved in %s %s", h.what, h.id)
	}
	return nil
}

// recheckTx re-runs the guard's baseline for what is about to be applied,
// in the applying transaction and for an agent of runnerID's (D3 at apply:
// a revocation, or a freeze of the agent, its group or its runner, committed
// since the decision): a deny refuses, and a hold is satisfied only by a
// citation that consumed an approval.
func (s *Service) recheckTx(ctx context.Context, tx pgx.Tx, a Applier, sess Session, runnerID string, c citation, req *guardv1.ApplyActionRequest) error {
	if s.baseline == nil {
		return fault.New(fault.Unavailable, "the guard is not wired (failing closed)")
	}
	resource := map[string]string{}
	for k, v := range req.GetResource() {
		resource[k] = v
	}
	if h := c.approved(); h != nil && len(h.resource) > 0 {
		resource = h.resource
	}
	if a.Resource != nil {
		decided, err := a.Resource(req)
		if err != nil {
			return err
		}
		maps.Copy(resource, decided)
	}
	in := guard.Input{
		Action:   req.GetAction(),
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: sess.GroupID, SessionId: sess.ID}}},
		Resource: resource,
		Payload:  req.GetPayload().AsMap(),
	}
	d, err := s.baseline(ctx, tx, in, runnerID)
	if err != nil {
		return fmt.Errorf("re-check the baseline: %w", err)
	}
	switch {
	case d.Effect == guard.EffectDeny && d.DecidedBy == guard.ByPrecheck:
		return fault.New(fault.Invalid, "payload: %s", d.Reason)
	case d.Effect == guard.EffectDeny:
		return fault.New(fault.Denied, "not applied: the guard now denies it (%s); decision %q no longer holds", d.Reason, c.id)
	case d.Effect == guard.EffectHold && c.hold == nil && c.standing != nil:
		ok, err := approvals.ApproversMay(ctx, tx, d.Rule, d.Scope, c.standing.approvedBy)
		if err != nil {
			return err
		}
		if !ok {
			return fault.New(fault.Denied, "not applied: standing grant %s's approvers may no longer approve it (%s); decision %q no longer holds", c.standing.id, d.Reason, c.id)
		}
	case d.Effect == guard.EffectHold && c.approved() == nil:
		// A gate still in audit or warn mode answers ALLOW here (the
		// baseline reads the live mode of this target's policy and action);
		// a HOLD means it is enforced now, and the citation has no approval.
		return fault.New(fault.Denied, "not applied: it needs an approval (%s) and the cited decision %q carries none", d.Reason, c.id)
	}
	return nil
}

// markAppliedTx consumes the citation and, for a grant's consuming
// decision, records the hold as applied with its result.
func markAppliedTx(ctx context.Context, tx pgx.Tx, c citation, out Applied) error {
	if err := guard.CiteTx(ctx, tx, c.id); err != nil {
		return err
	}
	if c.hold == nil {
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode applied result: %w", err)
	}
	return approvals.MarkAppliedTx(ctx, tx, c.hold.id, b)
}
