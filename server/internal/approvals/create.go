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
	a, err := anchorTx(ctx, tx, req)
	if err != nil {
		return CreateResult{}, err
	}
	dedupKey := ScopedDedupKey(req.Kind, a.groupID, req.SessionID, req.DedupKey)
	if dedupKey != "" {
		existing, err := s.liveByDedupKey(ctx, tx, dedupKey)
		if err != nil {
			return CreateResult{}, err
		}
		if existing != nil {
			return CreateResult{Hold: existing, Undelivered: existing.DeliveredTo == ""}, nil
		}
	}
	// The approvers, the quorum and the escalation plan (reach.go): a hold
	// nobody can approve, or whose quorum no set of them can meet, is not
	// made, and the requester is told why and what would fix it.
	ap, err := s.approversTx(ctx, tx, req, a)
	if err != nil {
		return CreateResult{}, err
	}
	if ap.unreachable != "" {
		return CreateResult{NoApprover: true, Reason: ap.unreachable}, nil
	}
	candidates, required, plan := ap.candidates, ap.required, ap.plan
	groupID, origin, ruleName, exclusiveID, alsoIDs, namedDeliv := a.groupID, a.origin, a.rule, a.exclusiveID, a.alsoIDs, a.namedDeliv
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
	if err := nameGroups(ctx, tx, req.Payload, req.Resource, &title, &question); err != nil {
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
