package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
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
// It is a pipeline, as a decision is: who the hold is for and who may
// approve it, read (anchorTx, the dedup lookup, approversTx: reach.go) →
// the row planned with no I/O (planHold) → the create transition
// (createTx) → the event, the transaction's last write. Its cursor is drawn
// there, and a cursor drawn but not committed holds up every reader that
// passes it (see readEvents), so what the caller still has to write goes in
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
	if existing, err := s.liveByDedupKey(ctx, tx, dedupKey); err != nil || existing != nil {
		return deduplicated(existing), err
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
	if err := nameGroups(ctx, tx, req.Payload, req.Resource, &req.Title, &req.Question); err != nil {
		return CreateResult{}, fmt.Errorf("create hold: %w", err)
	}
	p, err := planHold(req, a, ap, dedupKey, s.cfg.DefaultHoldTTL, time.Now())
	if err != nil {
		return CreateResult{}, fmt.Errorf("create hold: %w", err)
	}
	hold, err := createTx(ctx, tx, p)
	if errors.Is(err, pgx.ErrNoRows) {
		// A concurrent request with the same key won the race; it has
		// committed (ON CONFLICT waited for it), so this statement sees it.
		existing, err := s.liveByDedupKey(ctx, tx, dedupKey)
		if err != nil || existing == nil {
			return CreateResult{}, fmt.Errorf("create hold: dedup key %q conflicted but no live hold found: %v", dedupKey, err)
		}
		return deduplicated(existing), nil
	}
	if err != nil {
		return CreateResult{}, fmt.Errorf("create hold: %w", err)
	}
	res := CreateResult{Hold: hold, Created: true, Undelivered: p.deliveredTo == "", Approvers: eligibleWords(ap.candidates, ap.required)}
	before := &pgx.Batch{}
	if req.BeforeEvent != nil {
		if err := req.BeforeEvent(ctx, before, res); err != nil {
			return CreateResult{}, err
		}
	}
	// Last: the event's cursor is in flight from here to commit.
	if err := insertEventTx(ctx, tx, hold, "requested", "", "", res.Undelivered, before.QueuedQueries...); err != nil {
		return CreateResult{}, err
	}
	s.metrics.HoldsCreatedTotal.WithLabelValues(hold.Kind).Inc()
	return res, nil
}

// deduplicated is the answer for a live hold that already carries the
// request's dedup key (none: nil).
func deduplicated(existing *guardv1.Hold) CreateResult {
	if existing == nil {
		return CreateResult{}
	}
	return CreateResult{Hold: existing, Undelivered: existing.DeliveredTo == ""}
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
	if key == "" {
		return nil, nil // no key, no dedup
	}
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
