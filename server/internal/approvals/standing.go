package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Standing grants (issue 32): an approval "for this session" or "for N
// hours" instead of once. This file is the standing_grants table's one
// writer. A standing grant is never broader than the request approved: the
// same catalog action and kind, agent group, resource and payload (no
// catalog entry declares a payload shape safe to generalise, so the payload
// must be identical), and the same session when session-bound. It is never
// given for what is always enforced: a global-scope hold (D1) or one that
// needs a step-up. It exists only once the hold is approved by its quorum,
// and only when every approval that counted asked for it (the narrowest
// asked wins).

// Standing is what an approver asked for besides "once".
type Standing struct {
	For     time.Duration // 0 with Session: the operator maximum
	Session bool          // bound to the hold's session
}

// Wanted says whether a standing grant was asked for at all.
func (st Standing) Wanted() bool { return st.For > 0 || st.Session }

// PayloadSHA256 is the payload's hash as standing grants store it: SHA-256
// over its JSON with sorted keys.
func PayloadSHA256(p map[string]any) string {
	if p == nil {
		p = map[string]any{}
	}
	b, _ := json.Marshal(p) // map keys are sorted; JSON-shaped values always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// checkStandingRequest refuses a standing request before anything is read
// (max: the server's --standing-grant-max).
func checkStandingRequest(r Resolution, max time.Duration) error {
	if !r.Standing.Wanted() {
		if r.Standing.For < 0 {
			return fault.New(fault.Invalid, "standing_for: must not be negative")
		}
		return nil
	}
	if r.Outcome != guardv1.Outcome_OUTCOME_APPROVE {
		return fault.New(fault.Invalid, "standing_for / standing_session: only an approval can stand")
	}
	if r.ChatTap {
		// A leaked bridge token must not pre-approve a day of requests: the
		// bridges approve once (issue 41).
		return fault.New(fault.Precondition, "a tap in chat approves once: a standing grant needs the console or the approver's own token (ncl approvals approve ID --for 8h)")
	}
	if max <= 0 {
		return fault.New(fault.Precondition, "standing grants are off on this server (--standing-grant-max 0): approve once")
	}
	return nil
}

// standingRefusal says why hold cur cannot get a standing grant ("" when
// it can): only a decision's hold of an agent group, never what is always
// enforced.
func standingRefusal(cur *guardv1.Hold, st Standing) string {
	switch {
	case cur.GetApproverScope() == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL:
		return "it is a global-scope hold, which is always asked (D1): approve it once"
	case cur.GetCatalogAction() == "" || cur.GetAgentGroupId() == "" || cur.GetRequester().GetAgent().GetAgentGroupId() == "":
		return "it was not held by a decision of an agent's action: approve it once"
	case st.Session && cur.GetSessionId() == "":
		return "it has no session to stand for: approve it once or for a time"
	case cur.GetStepUp():
		// Read with the hold (holdRow.proto): step-up is asked every time.
		return "its action needs a step-up, which is asked every time: approve it once"
	}
	return ""
}

// standingOfQuorumTx is the standing grant a quorum hold's counted
// approvals agreed on: none unless every one asked for it; the shortest
// time, session-bound when any asked so.
func standingOfQuorumTx(ctx context.Context, tx pgx.Tx, holdID string, max time.Duration) (Standing, []string, error) {
	rows, err := tx.Query(ctx, `SELECT user_id, standing_secs, standing_session FROM hold_approvals
		WHERE hold_id = $1 AND counted ORDER BY approved_at, user_id`, holdID)
	if err != nil {
		return Standing{}, nil, fmt.Errorf("read the approvals of hold %s: %w", holdID, err)
	}
	defer rows.Close()
	out := Standing{For: max}
	var users []string
	for rows.Next() {
		var user string
		var secs int64
		var session bool
		if err := rows.Scan(&user, &secs, &session); err != nil {
			return Standing{}, nil, err
		}
		if secs == 0 && !session {
			return Standing{}, nil, nil // someone approved once: once it is
		}
		if d := time.Duration(secs) * time.Second; secs > 0 && d < out.For {
			out.For = d
		}
		out.Session = out.Session || session
		users = append(users, user)
	}
	return out, users, rows.Err()
}

// createStandingTx records hold's standing grant, approved by users, in
// the transaction that approved the hold.
func (s *Service) createStandingTx(ctx context.Context, tx pgx.Tx, hold *guardv1.Hold, st Standing, users []string) (*guardv1.StandingGrant, error) {
	d := st.For
	if d <= 0 || d > s.cfg.StandingGrantMax {
		d = s.cfg.StandingGrantMax
	}
	session := ""
	if st.Session {
		session = hold.GetSessionId()
	}
	payload := hold.GetPayload().AsMap()
	pj, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	resource := hold.GetResource()
	if resource == nil {
		resource = map[string]string{}
	}
	requester := hold.GetRequester().GetAgent().GetAgentGroupId()
	if requester == "" {
		return nil, fault.New(fault.Precondition, "hold %s was not asked by an agent: approve it once", hold.GetId())
	}
	g, err := scanStanding(tx.QueryRow(ctx, `INSERT INTO standing_grants (id, hold_id, kind, catalog_action, agent_group_id,
			requester_group_id, session_id, resource, payload, payload_sha256, approved_by, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, now() + make_interval(secs => $12))
		RETURNING `+standingColumns,
		store.NewID("sg_", 8), hold.GetId(), hold.GetKind(), hold.GetCatalogAction(), hold.GetAgentGroupId(),
		requester, session, resource, string(pj), PayloadSHA256(payload), users, d.Seconds()))
	if err != nil {
		return nil, fmt.Errorf("record standing grant of hold %s: %w", hold.GetId(), err)
	}
	return g, nil
}

const standingColumns = `id, hold_id, kind, catalog_action, agent_group_id, session_id, resource, payload, approved_by,
	created_at, expires_at, revoked_at, revoked_by, uses, last_used_at`

func scanStanding(row pgx.Row) (*guardv1.StandingGrant, error) {
	var (
		g                   guardv1.StandingGrant
		payload             []byte
		created, expires    time.Time
		revoked, lastUsed   *time.Time
		resource            map[string]string
		approvedBy          []string
		revokedBy, session  string
		kind, action, group string
	)
	if err := row.Scan(&g.Id, &g.HoldId, &kind, &action, &group, &session, &resource, &payload, &approvedBy,
		&created, &expires, &revoked, &revokedBy, &g.Uses, &lastUsed); err != nil {
		return nil, err
	}
	g.Kind, g.CatalogAction, g.AgentGroupId, g.SessionId, g.ApprovedBy, g.RevokedBy = kind, action, group, session, approvedBy, revokedBy
	if len(resource) > 0 {
		g.Resource = resource
	}
	g.Payload = &structpb.Struct{}
	if err := protojson.Unmarshal(payload, g.Payload); err != nil {
		return nil, fmt.Errorf("standing grant %s: payload: %w", g.Id, err)
	}
	g.CreatedAt, g.ExpiresAt = timestamppb.New(created), timestamppb.New(expires)
	if revoked != nil {
		g.RevokedAt = timestamppb.New(*revoked)
	}
	if lastUsed != nil {
		g.LastUsedAt = timestamppb.New(*lastUsed)
	}
	return &g, nil
}

// StandingQuery is a request that would be held: what a standing grant
// must match exactly.
type StandingQuery struct {
	Kind, CatalogAction, AgentGroupID, SessionID string
	RequesterGroupID                             string // the asking agent's group
	// Rule and Scope are who the request would be held for now: every
	// approver of the grant must still be eligible under them (a revoked
	// role, or a policy that names someone else, ends the grant).
	Rule     *guardv1.ApproverRule
	Scope    guardv1.ApproverScope
	Resource map[string]string
	Payload  map[string]any
	// Approvals is the quorum the decision's own rule asks (a policy's, an
	// MCP tool setting's), as for a hold.
	Approvals int
}

// StandingUse is a standing grant a request used.
type StandingUse struct {
	ID, HoldID string
	ApprovedBy []string
	Until      time.Time
}

// UseStandingTx finds a live standing grant matching q exactly and counts
// its use, in the caller's transaction (the decision's): not revoked, not
// expired, every approver who gave it still eligible for its hold now (a
// revoked role ends it), and what it stands for still grantable as it was
// given (standingBarTx: no step-up asked since, a quorum its approvers still
// meet). The row is locked, so a revocation committing meanwhile is seen or
// waits. nil: none matches, the request is held.
func (s *Service) UseStandingTx(ctx context.Context, tx pgx.Tx, q StandingQuery) (*StandingUse, error) {
	if q.RequesterGroupID == "" || q.Scope == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL {
		return nil, nil // only an agent's request stands on a grant
	}
	need, stepUp, err := s.standingBarTx(ctx, tx, q)
	if err != nil || stepUp {
		return nil, err // a step-up is asked every time: hold
	}
	resource := q.Resource
	if resource == nil {
		resource = map[string]string{}
	}
	payload := q.Payload
	if payload == nil {
		payload = map[string]any{}
	}
	pj, err := json.Marshal(payload)
	if err != nil {
		return nil, nil // a payload that cannot be encoded matches nothing
	}
	rows, err := tx.Query(ctx, `SELECT id, hold_id, approved_by, expires_at FROM standing_grants
		WHERE agent_group_id = $1 AND catalog_action = $2 AND payload_sha256 = $3 AND kind = $4
		  AND payload = $5::jsonb AND resource = $6 AND (session_id = '' OR session_id = $7)
		  AND requester_group_id = $8 AND revoked_at IS NULL AND expires_at > now()
		ORDER BY expires_at DESC, id LIMIT 4 FOR UPDATE`,
		q.AgentGroupID, q.CatalogAction, PayloadSHA256(payload), q.Kind, string(pj), resource, q.SessionID, q.RequesterGroupID)
	if err != nil {
		return nil, fmt.Errorf("find a standing grant: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StandingUse, error) {
		var u StandingUse
		return u, r.Scan(&u.ID, &u.HoldID, &u.ApprovedBy, &u.Until)
	})
	if err != nil {
		return nil, fmt.Errorf("find a standing grant: %w", err)
	}
	for _, u := range found {
		if len(u.ApprovedBy) < need {
			continue // given by fewer approvers than such a hold needs now
		}
		ok, err := ApproversMay(ctx, tx, q.Rule, q.Scope, u.ApprovedBy)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE standing_grants SET uses = uses + 1, last_used_at = now() WHERE id = $1`, u.ID); err != nil {
			return nil, fmt.Errorf("count the use of standing grant %s: %w", u.ID, err)
		}
		return &u, nil
	}
	return nil, nil
}

// standingBarTx is what a standing grant must still clear to stand for q:
// the quorum a hold of q needs today (the settings may have been raised
// since the grant was given) and whether its action now asks a step-up
// (marked since: a step-up is never given standing). One round trip.
func (s *Service) standingBarTx(ctx context.Context, tx pgx.Tx, q StandingQuery) (need int, stepUp bool, err error) {
	var parts quorumParts
	chain := q.Rule.GetAdminsOfScope() != nil
	b := &pgx.Batch{}
	b.Queue(`SELECT COALESCE((SELECT step_up FROM action_settings WHERE action = $1), false)`, q.CatalogAction).QueryRow(func(row pgx.Row) error {
		return row.Scan(&stepUp)
	})
	if chain {
		s.queueQuorumParts(b, &parts, q.CatalogAction, q.AgentGroupID, false)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, false, fmt.Errorf("read what a standing grant must clear: %w", err)
	}
	a := holdAnchor{rule: ruleAdminsOfScope, groupID: q.AgentGroupID}
	if !chain {
		a.rule = ruleExclusive
	}
	need, _ = quorumOf(CreateRequest{CatalogAction: q.CatalogAction, Approvals: q.Approvals}, a, parts, chain)
	return need, stepUp, nil
}

// ApproversMay: every approver of a standing grant may resolve a hold of
// rule and scope now — the rule the request would be held under today, so
// a revoked role or a policy naming someone else ends the grant. Never for
// a global-scope hold.
func ApproversMay(ctx context.Context, q store.Querier, rule *guardv1.ApproverRule, scope guardv1.ApproverScope, approvedBy []string) (bool, error) {
	if scope == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL || rule == nil {
		return false, nil
	}
	for _, user := range approvedBy {
		ok, err := MayResolve(ctx, q, rule, scope, user)
		if err != nil || !ok {
			return false, err
		}
	}
	return len(approvedBy) > 0, nil
}

// StandingForApplyTx re-checks, in the applying transaction, the standing
// grant a cited ALLOW used (D3 at apply): it must still be live (the caller
// checks its approvers against the rule its baseline holds under now). It
// returns the approved payload, resource and approvers.
func StandingForApplyTx(ctx context.Context, tx pgx.Tx, id string) (payload map[string]any, resource map[string]string, approvedBy []string, why string, err error) {
	g, err := scanStanding(tx.QueryRow(ctx, `SELECT `+standingColumns+` FROM standing_grants WHERE id = $1 FOR SHARE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil, fmt.Sprintf("standing grant %s no longer exists", id), nil
	}
	if err != nil {
		return nil, nil, nil, "", fmt.Errorf("read standing grant %s: %w", id, err)
	}
	var live bool
	if err := tx.QueryRow(ctx, `SELECT revoked_at IS NULL AND expires_at > now() FROM standing_grants WHERE id = $1`, id).Scan(&live); err != nil {
		return nil, nil, nil, "", fmt.Errorf("read standing grant %s: %w", id, err)
	}
	if !live {
		return nil, nil, nil, fmt.Sprintf("standing grant %s was revoked or has expired", id), nil
	}
	return g.GetPayload().AsMap(), g.GetResource(), g.GetApprovedBy(), "", nil
}

// mayManageStanding: the operator, or a user who may resolve the grant's hold.
func mayManageStanding(ctx context.Context, q store.Querier, v Viewer, holdID string) (bool, error) {
	if v.All {
		return true, nil
	}
	if v.UserID == "" {
		return false, nil
	}
	roles, err := LoadRoles(ctx, q, v.UserID)
	if err != nil {
		return false, err
	}
	return mayManageWithRoles(ctx, q, v.UserID, roles, holdID)
}

// mayManageWithRoles: owners and global admins manage every standing grant
// (revoking one only takes a permission away, and they answer for all of
// them); anyone else the grants whose holds they may resolve.
func mayManageWithRoles(ctx context.Context, q store.Querier, user string, roles Roles, holdID string) (bool, error) {
	if roles.Owner || roles.GlobalAdmin {
		return true, nil
	}
	h, err := GetHold(ctx, q, holdID)
	if err != nil {
		return false, err
	}
	return MayResolveWithRoles(h.GetApproverRule(), h.GetApproverScope(), user, roles), nil
}

// ListStanding lists the standing grants v may manage, newest first.
func (s *Service) ListStanding(ctx context.Context, v Viewer, group string, includeEnded bool) (_ []*guardv1.StandingGrant, err error) {
	defer store.Faulted(&err, "standing grant")
	rows, err := s.pool.Query(ctx, `SELECT `+standingColumns+` FROM standing_grants
		WHERE ($1 = '' OR agent_group_id = $1) AND ($2 OR (revoked_at IS NULL AND expires_at > now()))
		ORDER BY created_at DESC, id LIMIT 1000`, group, includeEnded)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*guardv1.StandingGrant, error) { return scanStanding(r) })
	if err != nil {
		return nil, err
	}
	if v.All {
		return all, nil
	}
	if v.UserID == "" {
		return []*guardv1.StandingGrant{}, nil
	}
	roles, err := LoadRoles(ctx, s.pool, v.UserID)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, g := range all {
		ok, err := mayManageWithRoles(ctx, s.pool, v.UserID, roles, g.GetHoldId())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, g)
		}
	}
	return slices.Clip(out), nil
}

// RevokeStanding ends a standing grant at once: the next matching request,
// on any replica, is held again (the decision reads the row live).
func (s *Service) RevokeStanding(ctx context.Context, v Viewer, by, id string) (_ *guardv1.StandingGrant, err error) {
	defer store.Faulted(&err, "standing grant")
	var g *guardv1.StandingGrant
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := scanStanding(tx.QueryRow(ctx, `SELECT `+standingColumns+` FROM standing_grants WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.New(fault.NotFound, "standing grant %s not found", id)
		}
		if err != nil {
			return err
		}
		ok, err := mayManageStanding(ctx, tx, v, cur.GetHoldId())
		if err != nil {
			return err
		}
		if !ok {
			return fault.New(fault.NotFound, "standing grant %s not found", id)
		}
		if cur.GetRevokedAt() != nil {
			g = cur
			return nil // revoked already: the same answer
		}
		g, err = scanStanding(tx.QueryRow(ctx, `UPDATE standing_grants SET revoked_at = now(), revoked_by = $2 WHERE id = $1
			RETURNING `+standingColumns, id, by))
		return err
	})
	if err != nil {
		return nil, err
	}
	slog.InfoContext(ctx, "standing grant revoked", "audit", true, "grant", id, "by", by)
	return g, nil
}
