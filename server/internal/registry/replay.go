package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/sessions"
	"github.com/clawguard/clawguard/server/internal/store"
)

// DecideTx decides a request in the caller's transaction
// (guard.Engine.DecideTx); after is called once it committed.
type DecideTx func(ctx context.Context, tx store.Querier, req *guard.Request) (resp *guardv1.DecideResponse, after func(), err error)

// heldAction is an approved hold as its replay reads it, locked.
type heldAction struct {
	catalogAction, status, session, consumedBy string
	payload                                    map[string]any
	resource                                   map[string]string
	applied                                    bool
	result                                     Applied
}

// applyGrant replays an approved hold of the session (ApplyAction with
// grant): in one transaction the guard decides the replay live — the
// baseline once, with the runner, so a revocation or a freeze committed
// since the approval denies it (D3) — and consumes the grant, and the
// domain applies the payload and resource the server holds (plus the keys
// the runner stamps). The runner sends neither; whatever it did, a hold is
// applied once: a hold applied already answers its recorded result.
func (s *Service) applyGrant(ctx context.Context, runnerID string, a Applier, req *guardv1.ApplyActionRequest) (*guardv1.ApplyActionResponse, error) {
	if req.GetDecisionId() != "" {
		return nil, fault.New(fault.Invalid, "decision_id: must be empty with grant (the replay is decided here)")
	}
	stamps := req.GetPayload().GetFields()
	for k := range stamps {
		if !slices.Contains(a.Stamped, k) {
			return nil, fault.New(fault.Invalid, "payload.%s: with grant the payload carries only the keys the runner stamps (%v); the rest is the hold's", k, a.Stamped)
		}
	}
	if s.decideTx == nil {
		return nil, fault.New(fault.Unavailable, "the guard is not wired (failing closed)")
	}
	var (
		out   *guardv1.ApplyActionResponse
		after func()
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		out, after, err = s.replayTx(ctx, tx, runnerID, a, req, stamps)
		return err
	})
	if err != nil {
		return nil, err
	}
	if after != nil {
		after()
	}
	return out, nil
}

// replayTx is applyGrant's transaction.
func (s *Service) replayTx(ctx context.Context, tx pgx.Tx, runnerID string, a Applier, req *guardv1.ApplyActionRequest, stamps map[string]*structpb.Value) (*guardv1.ApplyActionResponse, func(), error) {
	sess, err := lockHostedSessionTx(ctx, tx, runnerID, req.GetSessionId())
	if err != nil {
		return nil, nil, err
	}
	h, err := readHeldTx(ctx, tx, req.GetGrant())
	if err != nil {
		return nil, nil, err
	}
	switch {
	case h.session != sess.ID:
		return nil, nil, fault.Deniedf("hold %s was not asked from session %s", req.GetGrant(), sess.ID)
	case h.catalogAction != req.GetAction():
		return nil, nil, fault.New(fault.Precondition, "hold %s is for %q, not %q", req.GetGrant(), h.catalogAction, req.GetAction())
	case h.applied:
		// Applied once already (perhaps by the session's previous runner,
		// whose answer was lost): the same answer, nothing changes.
		return h.answer(guardv1.Effect_EFFECT_ALLOW, "hold applied already"), nil, nil
	case h.status != "approved":
		// Even where the baseline now allows the action outright, a hold
		// nobody approved is not what runs.
		return nil, nil, fault.New(fault.Precondition, "hold %s is %s, not approved", req.GetGrant(), h.status)
	}
	apply, in, err := h.request(req, stamps)
	if err != nil {
		return nil, nil, err
	}
	if a.Resource != nil {
		decided, err := a.Resource(apply)
		if err != nil {
			return nil, nil, err
		}
		if len(in.Resource) == 0 {
			in.Resource = decided
		}
	}
	in.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: sess.GroupID, SessionId: sess.ID}}}
	resp, after, err := s.decideTx(ctx, tx, &guard.Request{Input: in, RunnerID: runnerID, RequireOwnedSession: true})
	if errors.Is(err, guard.ErrActorNotOwned) {
		return nil, nil, fault.Deniedf("runner %q does not host session %q", runnerID, sess.ID)
	}
	if err != nil {
		return nil, nil, err
	}
	out := &guardv1.ApplyActionResponse{Decision: resp.GetDecision(), DecisionId: resp.GetDecisionId()}
	if resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		return out, after, nil // logged in tx; the grant is unused and nothing applied
	}
	apply.DecisionId = resp.GetDecisionId()
	done, err := a.Apply(ctx, tx, sess, apply)
	if err != nil {
		return nil, nil, err
	}
	if err := markAppliedTx(ctx, tx, citation{id: apply.DecisionId, hold: &consumedHold{id: req.GetGrant()}}, done); err != nil {
		return nil, nil, err
	}
	if err := sessions.EventTx(ctx, tx, sess.ID, "out", "action", map[string]any{
		"action": req.GetAction(), "decision_id": apply.DecisionId, "result": done.Result,
	}); err != nil {
		return nil, nil, err
	}
	if out.Result, err = structpb.NewStruct(done.Result); err != nil {
		return nil, nil, fmt.Errorf("encode result: %w", err)
	}
	out.Message = done.Message
	return out, after, nil
}

// lockHostedSessionTx reads the session FOR SHARE — a move to another
// runner waits for this application, and this one sees a finished move —
// and refuses one runnerID does not host.
func lockHostedSessionTx(ctx context.Context, tx pgx.Tx, runnerID, sessionID string) (Session, error) {
	var sess Session
	var owner string
	err := tx.QueryRow(ctx, `SELECT id, agent_group_id, COALESCE(runner_id, '') FROM sessions WHERE id = $1 FOR SHARE`, sessionID).Scan(&sess.ID, &sess.GroupID, &owner)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
		return Session{}, fault.New(fault.Denied, "runner %q does not host session %q", runnerID, sessionID)
	}
	if err != nil {
		return Session{}, fmt.Errorf("read session: %w", err)
	}
	return sess, nil
}

// readHeldTx reads and locks the hold a replay names.
func readHeldTx(ctx context.Context, tx pgx.Tx, id string) (heldAction, error) {
	var (
		h               heldAction
		payload, result []byte
	)
	err := tx.QueryRow(ctx, `SELECT COALESCE(catalog_action, ''), status, COALESCE(session_id, ''), COALESCE(consumed_by, ''),
			payload, resource, applied_at IS NOT NULL, applied_result
		FROM holds WHERE id = $1 FOR UPDATE`, id).Scan(&h.catalogAction, &h.status, &h.session, &h.consumedBy,
		&payload, &h.resource, &h.applied, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, fault.New(fault.Precondition, "hold %s not found", id)
	}
	if err != nil {
		return h, fmt.Errorf("read approved hold %s: %w", id, err)
	}
	if err := json.Unmarshal(payload, &h.payload); err != nil {
		return h, fmt.Errorf("decode approved hold %s: %w", id, err)
	}
	if h.applied && len(result) > 0 {
		if err := json.Unmarshal(result, &h.result); err != nil {
			return h, fmt.Errorf("decode applied result of hold %s: %w", id, err)
		}
	}
	return h, nil
}

// request is what the hold's replay decides and applies: its payload and
// resource, the runner's stamps added to what is applied only.
func (h heldAction) request(req *guardv1.ApplyActionRequest, stamps map[string]*structpb.Value) (*guardv1.ApplyActionRequest, guard.Input, error) {
	applied, err := structpb.NewStruct(h.payload)
	if err != nil {
		return nil, guard.Input{}, fmt.Errorf("encode approved hold %s: %w", req.GetGrant(), err)
	}
	for k, v := range stamps {
		applied.Fields[k] = v
	}
	in := guard.Input{Action: req.GetAction(), Payload: h.payload, Resource: maps.Clone(h.resource), Grant: req.GetGrant()}
	apply := &guardv1.ApplyActionRequest{SessionId: req.GetSessionId(), Action: req.GetAction(), Payload: applied,
		Resource: maps.Clone(h.resource), Grant: req.GetGrant()}
	return apply, in, nil
}

// answer is a hold applied already, as ApplyAction answers it: the
// consuming decision and the recorded result.
func (h heldAction) answer(effect guardv1.Effect, reason string) *guardv1.ApplyActionResponse {
	out := &guardv1.ApplyActionResponse{DecisionId: h.consumedBy, Message: h.result.Message,
		Decision: &guardv1.Decision{Effect: effect, Reason: reason, DecidedBy: guard.ByGrant}}
	out.Result, _ = structpb.NewStruct(h.result.Result)
	return out
}
