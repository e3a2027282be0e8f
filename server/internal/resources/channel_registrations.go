package resources

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/server/internal/store"
)

// A chat's pending registration (pending_channel_registrations): one row
// per chat while its registration card is out or the new agent's name is
// awaited. Inbound's registration flow (inbound/channels.go) drives it
// through these functions, in its own transactions; deleting a group or a
// chat deletes its row too.

// PendingRegistration is a chat's pending registration row.
type PendingRegistration struct {
	MessagingGroupID string
	HoldID           string
	Original         []byte // the message that triggered it, replayed once it is registered
	Approver         string // the approver the card was delivered to
	AwaitingNameFrom string // "" unless the approver's next message is the new agent's name
}

// RecordPendingRegistrationTx stores the chat's pending registration for
// holdID (a stale row of the chat is replaced, and any name it awaited is
// no longer awaited).
func RecordPendingRegistrationTx(ctx context.Context, q store.Querier, mgID, holdID string, original []byte, approver string) error {
	if _, err := q.Exec(ctx, `INSERT INTO pending_channel_registrations
			(messaging_group_id, hold_id, original_message, approver_user_id)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (messaging_group_id) DO UPDATE SET hold_id = EXCLUDED.hold_id,
			original_message = EXCLUDED.original_message, approver_user_id = EXCLUDED.approver_user_id,
			awaiting_name_from = '', created_at = now()`,
		mgID, holdID, original, approver); err != nil {
		return fmt.Errorf("record pending registration: %w", err)
	}
	return nil
}

// LockPendingRegistrationTx locks the chat's pending registration (FOR
// UPDATE); found is false when there is none (rejected elsewhere, the
// group or chat deleted, ...).
func LockPendingRegistrationTx(ctx context.Context, q store.Querier, mgID string) (p PendingRegistration, found bool, err error) {
	p = PendingRegistration{MessagingGroupID: mgID}
	err = q.QueryRow(ctx, `SELECT COALESCE(hold_id, ''), original_message, approver_user_id, awaiting_name_from
		FROM pending_channel_registrations WHERE messaging_group_id = $1 FOR UPDATE`, mgID).
		Scan(&p.HoldID, &p.Original, &p.Approver, &p.AwaitingNameFrom)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("lock pending registration of %s: %w", mgID, err)
	}
	return p, true, nil
}

// AwaitNameTx makes the chat's registration await user's next message as
// the new agent's name. One wait per user: any other registration that
// awaited a name from user no longer does.
func AwaitNameTx(ctx context.Context, q store.Querier, mgID, user string) error {
	if _, err := q.Exec(ctx, `UPDATE pending_channel_registrations
		SET awaiting_name_from = CASE WHEN messaging_group_id = $1 THEN $2 ELSE '' END
		WHERE messaging_group_id = $1 OR awaiting_name_from = $2`, mgID, user); err != nil {
		return fmt.Errorf("await agent name: %w", err)
	}
	return nil
}

// StopAwaitingNameTx ends the chat's registration's wait for user's name
// (a wait for another user's is left).
func StopAwaitingNameTx(ctx context.Context, q store.Querier, mgID, user string) error {
	if _, err := q.Exec(ctx, `UPDATE pending_channel_registrations SET awaiting_name_from = ''
		WHERE messaging_group_id = $1 AND awaiting_name_from = $2`, mgID, user); err != nil {
		return fmt.Errorf("disarm name capture: %w", err)
	}
	return nil
}

// EndPendingRegistrationTx removes the chat's pending registration.
func EndPendingRegistrationTx(ctx context.Context, q store.Querier, mgID string) error {
	if _, err := q.Exec(ctx, `DELETE FROM pending_channel_registrations WHERE messaging_group_id = $1`, mgID); err != nil {
		return fmt.Errorf("end registration of %s: %w", mgID, err)
	}
	return nil
}
