package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/protobuf/encoding/protojson"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
)

// DefaultOptions are the card buttons when the caller gives none (the
// seed's Approve / Reject / Reject with reason…).
var DefaultOptions = []*guardv1.HoldOption{
	{Label: "Approve", Value: "approve"},
	{Label: "Reject", Value: "reject"},
	{Label: "Reject with reason…", Value: "reject_with_reason"},
}

// CreateHoldTx creates a hold in the caller's transaction: approver picking
// (scoped admins of the anchor group, then global admins, then owners, each
// by grant time; anchor empty → global admins then owners; exclusive → that
// user; a global-scope hold only owners and global admins), the delivery
// target (first candidate with a known DM, preferring the origin channel
// type), dedup (a live hold with the key is returned, Created=false) and the
// `requested` event. No eligible approver → no row, NoApprover with Reason.
//
// The event is CreateHoldTx's last write: its cursor is drawn there, and a
// cursor drawn but not committed holds up every reader that passes it (see
// readEvents), so what the caller still has to write goes in
// req.BeforeEvent, and after CreateHoldTx nothing but the commit should
// follow.
func (s *Service) CreateHoldTx(ctx context.Context, tx pgx.Tx, req CreateRequest) (CreateResult, error) {
	if req.Kind == "" {
		return CreateResult{}, errors.New("create hold: kind is required")
	}
	origin := req.OriginChannel
	groupID := req.AgentGroupID
	if req.SessionID != "" {
		var sessGroup, sessChannel string
		err := tx.QueryRow(ctx, `SELECT s.agent_group_id, COALESCE(mg.channel_type, '')
			FROM sessions s LEFT JOIN messaging_groups mg ON mg.id = s.messaging_group_id
			WHERE s.id = $1`, req.SessionID).Scan(&sessGroup, &sessChannel)
		if err != nil {
			return CreateResult{}, fmt.Errorf("create hold: session %s: %w", req.SessionID, err)
		}
		if groupID == "" {
			groupID = sessGroup
		}
		if origin == "" {
			origin = sessChannel
		}
	}

	// The rule's columns: exclusive → approver_user_id is the one user;
	// admins-of-scope → agent_group_id is the anchor and approver_user_id
	// the recorded delivered-to approver (if any).
	rule := req.Rule
	if rule == nil {
		rule = &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{}}}
	}
	var (
		ruleName    string
		exclusiveID string
		alsoIDs     []string // further named approvers of an exclusive rule
		namedDeliv  string
	)
	switch r := rule.GetKind().(type) {
	case *guardv1.ApproverRule_Exclusive:
		ruleName, exclusiveID = ruleExclusive, r.Exclusive.GetUserId()
		if exclusiveID == "" {
			return CreateResult{}, errors.New("create hold: exclusive approver rule names no user")
		}
		alsoIDs = distinctOthers(exclusiveID, r.Exclusive.GetAlsoUserIds())
	case *guardv1.ApproverRule_AdminsOfScope:
		ruleName, namedDeliv = ruleAdminsOfScope, r.AdminsOfScope.GetDeliveredTo()
		if g := r.AdminsOfScope.GetAgentGroupId(); g != "" {
			groupID = g
		}
	default:
		return CreateResult{}, errors.New("create hold: approver rule has no kind")
	}
	global := req.Scope == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL

	dedupKey := ScopedDedupKey(req.Kind, groupID, req.SessionID, req.DedupKey)
	if dedupKey != "" {
		existing, err := s.liveByDedupKey(ctx, tx, dedupKey)
		if err != nil {
			return CreateResult{}, err
		}
		if existing != nil {
			return CreateResult{Hold: existing, Undelivered: existing.DeliveredTo == ""}, nil
		}
	}

	// The approvers, the quorum the settings ask and the escalation plan
	// are independent reads: one round trip. (The quorum and the plan are
	// read even when no approver exists; reads only, nothing is lost.)
	var (
		candidates []candidate
		chain      int
		plan       EscalationPlan
	)
	reads := &pgx.Batch{}
	queuePickApprovers(reads, &candidates, ruleName, append([]string{exclusiveID}, alsoIDs...), namedDeliv, groupID, global)
	needChain := ruleName == ruleAdminsOfScope && !choiceCard(req.Options)
	if needChain {
		s.queueRequiredApprovals(reads, &chain, req.CatalogAction, groupID, global)
	}
	queueEscalationPlan(reads, &plan, req, ruleName, groupID)
	if err := tx.SendBatch(ctx, reads).Close(); err != nil {
		return CreateResult{}, err
	}
	if len(candidates) == 0 {
		reason := "no owner or admin configured to approve"
		if exclusiveID != "" {
			reason = fmt.Sprintf("the named approver %s is not an owner or global admin, and this action needs one", exclusiveID)
		} else if global {
			reason = "no owner or global admin configured to approve"
		}
		return CreateResult{NoApprover: true, Reason: reason}, nil
	}
	// Quorum: an admin-chain hold needs what scope, action and group ask,
	// and what its decision's own rule asks (an MCP tool's setting); an
	// exclusive hold what its own rule asks (a message policy's
	// approvals), since only its named users may approve it.
	required := max(req.Approvals, 1)
	if needChain {
		required = max(required, chain)
	}
	if len(candidates) < required {
		return CreateResult{NoApprover: true, Reason: fmt.Sprintf(
			"this action needs %d distinct approvals but only %d eligible approver(s) exist", required, len(candidates))}, nil
	}
	target := pickDelivery(candidates, origin)
	// A quorum needs more than one approver to see the card: every other
	// eligible approver with a known DM gets it too.
	var alsoDelivered []string
	if required > 1 {
		for _, c := range candidates {
			if c.id != target && len(c.dms) > 0 {
				alsoDelivered = append(alsoDelivered, c.id)
			}
		}
	}

	approverUser := exclusiveID
	if ruleName == ruleAdminsOfScope {
		approverUser = namedDeliv
		if approverUser == "" && req.RecordDeliveredTo {
			approverUser = target
		}
	}
	expires := req.ExpiresAt
	if expires.IsZero() && s.cfg.DefaultHoldTTL > 0 {
		expires = time.Now().Add(s.cfg.DefaultHoldTTL)
	}
	var err error
	payload := []byte("{}")
	if req.Payload != nil {
		if payload, err = protojson.Marshal(req.Payload); err != nil {
			return CreateResult{}, fmt.Errorf("create hold: payload: %w", err)
		}
	}
	requester := []byte("{}")
	if req.Requester != nil {
		if requester, err = protojson.Marshal(req.Requester); err != nil {
			return CreateResult{}, fmt.Errorf("create hold: requester: %w", err)
		}
	}
	opts := req.Options
	if len(opts) == 0 {
		opts = DefaultOptions
	}
	optRows := make([]holdOption, 0, len(opts))
	for _, o := range opts {
		optRows = append(optRows, holdOption{Label: o.GetLabel(), Value: o.GetValue()})
	}
	options, _ := json.Marshal(optRows)

	scope, err := scopeWord(req.Scope)
	if err != nil {
		return CreateResult{}, fmt.Errorf("create hold: %w", err)
	}
	resource := req.Resource
	if resource == nil {
		resource = map[string]string{}
	}
	title, question := req.Title, req.Question
	if err := nameGroups(ctx, tx, &title, &question); err != nil {
		return CreateResult{}, fmt.Errorf("create hold: %w", err)
	}
	hold, err := readHold(ctx, tx, sqlCreate+holdColumns,
		newHoldID(), req.Kind, req.CatalogAction, payload, req.SessionID, groupID, requester,
		approverUser, ruleName, scope, dedupKey, nullTime(expires), title, question, options,
		target, origin, req.DeliveryAction, req.SweptOnRestart, required, orEmpty(alsoIDs), resource, orEmpty(alsoDelivered),
		plan.RemindAfterS, plan.EscalateAfterS, orEmpty(plan.EscalateTo),
		telemetry.Traceparent(ctx))
	if errors.Is(err, pgx.ErrNoRows) {
		// A concurrent request with the same key won the race; it has
		// committed (ON CONFLICT waited for it), so this statement sees it.
		existing, err := s.liveByDedupKey(ctx, tx, dedupKey)
		if err != nil || existing == nil {
			return CreateResult{}, fmt.Errorf("create hold: dedup key %q conflicted but no live hold found: %v", dedupKey, err)
		}
		return CreateResult{Hold: existing, Undelivered: existing.DeliveredTo == ""}, nil
	}
	if err != nil {
		return CreateResult{}, fmt.Errorf("create hold: %w", err)
	}
	res := CreateResult{Hold: hold, Created: true, Undelivered: target == "", Approvers: eligibleWords(candidates, required)}
	before := &pgx.Batch{}
	if req.BeforeEvent != nil {
		if err := req.BeforeEvent(ctx, before, res); err != nil {
			return CreateResult{}, err
		}
	}
	// Last: the event's cursor is in flight from here to commit.
	if err := insertEventTx(ctx, tx, hold, "requested", "", "", target == "", before.QueuedQueries...); err != nil {
		return CreateResult{}, err
	}
	s.metrics.HoldsCreatedTotal.WithLabelValues(hold.Kind).Inc()
	return res, nil
}

// ScopedDedupKey is the stored dedup key: the caller's key inside the
// namespace of the hold's kind, anchor group and session, all set by the
// server. A caller's key is never stored raw, so no card can carry the key
// of another flow (a runner card "sender_admit:<chat>:<sender>" lands in its
// own kind and session and the real admission card is still created).
// Empty key → no dedup. migrations/0110 builds the same shape.
func ScopedDedupKey(kind, anchorGroup, session, key string) string {
	if key == "" {
		return ""
	}
	return kind + "/" + anchorGroup + "/" + session + "/" + key
}

// choiceCard reports a card whose buttons are choices (channel registration:
// a new agent, or wire to an existing one) rather than approve / reject:
// one approver's pick decides it, so a quorum does not apply.
func choiceCard(opts []*guardv1.HoldOption) bool {
	for _, o := range opts {
		switch o.GetValue() {
		case "approve", "reject", ChoiceRejectWithReason:
		default:
			return true
		}
	}
	return false
}

// queueRequiredApprovals queues the read of a hold's quorum onto b: the
// largest of its approver scope's default, its catalog action's setting and
// its anchor group's setting; *n is set when b's results are read.
func (s *Service) queueRequiredApprovals(b *pgx.Batch, n *int, action, group string, global bool) {
	def := s.cfg.GroupHoldApprovals
	if global {
		def = s.cfg.GlobalHoldApprovals
	}
	b.Queue(`SELECT GREATEST($3::int,
			COALESCE((SELECT approvals FROM action_settings WHERE action = $1), 0),
			COALESCE((SELECT hold_approvals FROM container_configs WHERE agent_group_id = NULLIF($2, '')), 0))`,
		action, group, max(def, 1)).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(n); err != nil {
			return fmt.Errorf("create hold: quorum: %w", err)
		}
		*n = max(*n, 1)
		return nil
	})
}

// liveByDedupKey returns the live hold carrying key, or nil. A pending hold
// with the key that is already past its expiry is expired here (with its
// event), so it neither dedups nor blocks the unique index.
func (s *Service) liveByDedupKey(ctx context.Context, tx pgx.Tx, key string) (*guardv1.Hold, error) {
	h, err := readHold(ctx, tx, `SELECT `+holdColumns+` FROM holds
		WHERE dedup_key = $1 AND status = 'pending' FOR UPDATE`, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("create hold: dedup lookup: %w", err)
	}
	if h.ExpiresAt != nil && !h.ExpiresAt.AsTime().After(time.Now()) {
		if _, err := s.resolveTx(ctx, tx, h.Id, guardv1.Outcome_OUTCOME_EXPIRE, "", "", "", nil); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return h, nil
}

// distinctOthers is list without first, empties and repeats, in order.
func distinctOthers(first string, list []string) []string {
	seen := map[string]bool{first: true}
	var out []string
	for _, u := range list {
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// candidate is an eligible approver and the channel types of their known DMs.
type candidate struct {
	id, name string // name: the user's display name ("" when none)
	dms      []string
}

// queuePickApprovers queues the read of the users who may resolve the hold
// onto b: in delivery preference order, de-duplicated, with their DMs (one
// query); *out is set when b's results are read.
func queuePickApprovers(b *pgx.Batch, out *[]candidate, rule string, exclusive []string, named, groupID string, global bool) {
	if rule == ruleExclusive {
		// Each named user, in the rule's order; on a global hold only those
		// who are owners or global admins (D1).
		b.Queue(`SELECT u.id, COALESCE((SELECT display_name FROM users WHERE id = u.id), ''),
				EXISTS (SELECT 1 FROM user_roles WHERE user_id = u.id AND (role = 'owner' OR (role = 'admin' AND agent_group_id IS NULL))),
				ARRAY(SELECT channel_type FROM user_dms WHERE user_id = u.id ORDER BY channel_type)
			FROM unnest($1::text[]) WITH ORDINALITY AS u(id, n) ORDER BY u.n`, exclusive).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					c   candidate
					top bool
				)
				if err := rows.Scan(&c.id, &c.name, &top, &c.dms); err != nil {
					return fmt.Errorf("pick approvers: %w", err)
				}
				if !global || top {
					*out = append(*out, c)
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("pick approvers: %w", err)
			}
			return nil
		})
		return
	}
	// tier -1: the named delivered-to user; 0: scoped admins of the anchor
	// (not for global holds: they may not resolve them); 1: global admins;
	// 2: owners.
	b.Queue(`SELECT r.user_id, COALESCE((SELECT display_name FROM users WHERE id = r.user_id), ''), r.tier,
			ARRAY(SELECT channel_type FROM user_dms d WHERE d.user_id = r.user_id ORDER BY channel_type)
		FROM (
			SELECT NULLIF($3, '') AS user_id, -1 AS tier, NULL::timestamptz AS granted_at
			UNION ALL
			SELECT user_id, CASE WHEN role = 'owner' THEN 2 WHEN agent_group_id IS NULL THEN 1 ELSE 0 END, granted_at
			  FROM user_roles
			 WHERE role = 'owner'
			    OR (role = 'admin' AND agent_group_id IS NULL)
			    OR (role = 'admin' AND NOT $2 AND agent_group_id = NULLIF($1, ''))
		) r WHERE r.user_id IS NOT NULL
		ORDER BY r.tier, r.granted_at, r.user_id`, groupID, global, named).Query(func(rows pgx.Rows) error {
		seen := map[string]bool{}
		var list []candidate
		namedIsTop := false
		for rows.Next() {
			var (
				c    candidate
				tier int
			)
			if err := rows.Scan(&c.id, &c.name, &tier, &c.dms); err != nil {
				return fmt.Errorf("pick approvers: %w", err)
			}
			switch {
			case tier == -1 && global:
				// On a global hold the named user counts only as an owner or
				// global admin (then delivered to first, below).
				continue
			case c.id == named && tier >= 1:
				namedIsTop = true
			}
			if !seen[c.id] {
				seen[c.id] = true
				list = append(list, c)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pick approvers: %w", err)
		}
		if global && namedIsTop {
			for i, c := range list {
				if c.id == named {
					list = append([]candidate{c}, append(list[:i:i], list[i+1:]...)...)
					break
				}
			}
		}
		*out = list
		return nil
	})
}

// pickDelivery is the first candidate with a known DM on the origin
// channel type, else the first candidate with any known DM, else "".
func pickDelivery(candidates []candidate, origin string) string {
	if origin != "" {
		for _, c := range candidates {
			if slices.Contains(c.dms, origin) {
				return c.id
			}
		}
	}
	for _, c := range candidates {
		if len(c.dms) > 0 {
			return c.id
		}
	}
	return ""
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// insertPartialEventTx appends an approved_partial event (one per approval
// short of a quorum; the hold_approvals key makes each user's count once).
func insertPartialEventTx(ctx context.Context, tx pgx.Tx, h *guardv1.Hold, approver string, remaining int) error {
	body, err := protojson.Marshal(h)
	if err != nil {
		return fmt.Errorf("hold event: encode hold: %w", err)
	}
	err = insertEvent(ctx, tx, `INSERT INTO hold_events (hold_id, type, resolver, approvals_remaining, hold)
		SELECT $2, 'approved_partial', $3, $4, $5 FROM (SELECT pg_advisory_xact_lock_shared($1)) AS compat`,
		previousReleaseEventLock, h.Id, approver, remaining, body)
	if err != nil {
		return fmt.Errorf("hold event approved_partial %s: %w", h.Id, err)
	}
	return nil
}

// insertEventTx appends a lifecycle event in tx (exactly once: hold_events
// is UNIQUE(hold_id, type), so a second one fails the transaction rather
// than publishing twice). Its cursor is in flight until the transaction
// commits and readers wait at it, so it is the transaction's last statement.
// Statements in before (the transaction's other last writes) go out in the
// same round trip, ahead of the event.
func insertEventTx(ctx context.Context, tx pgx.Tx, h *guardv1.Hold, typ, outcome, resolver string, undelivered bool, before ...*pgx.QueuedQuery) error {
	body, err := protojson.Marshal(h)
	if err != nil {
		return fmt.Errorf("hold event: encode hold: %w", err)
	}
	err = insertEventAfter(ctx, tx, before, `INSERT INTO hold_events (hold_id, type, outcome, resolver, undelivered, hold)
		SELECT $2, $3, NULLIF($4, ''), $5, $6, $7 FROM (SELECT pg_advisory_xact_lock_shared($1)) AS compat`,
		previousReleaseEventLock, h.Id, typ, outcome, resolver, undelivered, body)
	if err != nil {
		return fmt.Errorf("hold event %s %s: %w", typ, h.Id, err)
	}
	return nil
}

// previousReleaseEventLock is the advisory lock the previous release's
// event readers take exclusive before reading, its writers shared to
// commit. Writers still take it shared, so a replica of the previous
// release still running during a rolling upgrade never reads past a cursor
// in flight; this release's readers never take it, so it orders nothing
// between this release's writers (shared never waits for shared). Drop it
// once no replica of the previous release can be running.
const previousReleaseEventLock int64 = 0x636c_6177_6576_7473 // "clawevts"

// insertEvent runs one hold_events INSERT in tx. A reader may have settled
// the cursor the insert drew, tombstoning it while the insert was between
// drawing the cursor and writing its row (see readEvents): the insert then
// fails on the cursor alone, and is made again, with a fresh cursor, from a
// savepoint taken in the same round trip. Nothing else of tx is undone.
func insertEvent(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	return insertEventAfter(ctx, tx, nil, sql, args...)
}

// insertEventAfter is insertEvent with the statements in before sent in the
// same round trip, ahead of the savepoint (their callbacks, if any, read
// their results; an error of one fails the event): a retry of the event
// keeps them.
func insertEventAfter(ctx context.Context, tx pgx.Tx, before []*pgx.QueuedQuery, sql string, args ...any) error {
	for attempt := 1; ; attempt++ {
		b := &pgx.Batch{}
		if attempt == 1 {
			b.QueuedQueries = append(b.QueuedQueries, before...)
		}
		b.Queue(`SAVEPOINT hold_event`)
		b.Queue(sql, args...)
		err := tx.SendBatch(ctx, b).Close()
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "hold_events_pkey" || attempt == 5 {
			return err
		}
		if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT hold_event`); err != nil {
			return err
		}
	}
}
