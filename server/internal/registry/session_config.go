package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/sessions"
)

// SessionConfig is the session and its group's current container config,
// read for the runner that hosts the session. It is infrastructure (what the
// runner needs to start the agent), so unlike GetGroup it does not pass
// through the agent's cli_scope. A session the runner does not host reads as
// PermissionDenied with the same message whether or not it exists, so the
// answer is no oracle for other runners' session ids.
func (s *Service) SessionConfig(ctx context.Context, runnerID, sessionID string) (_ *guardv1.GetSessionConfigResponse, err error) {
	defer store.Faulted(&err, "session config")
	if sessionID == "" {
		return nil, fault.New(fault.Invalid, "session_id: required")
	}
	var out *guardv1.GetSessionConfigResponse
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var owner string
		err := tx.QueryRow(ctx, `SELECT COALESCE(runner_id, '') FROM sessions WHERE id = $1`, sessionID).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
			return notHostedError(runnerID, sessionID)
		}
		if err != nil {
			return fmt.Errorf("read session owner: %w", err)
		}
		sess, err := sessions.ReadTx(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		g, err := resources.ReadGroup(ctx, tx, sess.GetAgentGroupId())
		if err != nil {
			return err
		}
		dests, err := resources.SessionDestinationsTx(ctx, tx, sess.GetAgentGroupId())
		if err != nil {
			return err
		}
		out = &guardv1.GetSessionConfigResponse{Session: sess, Group: g, Destinations: dests}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func notHostedError(runnerID, sessionID string) error {
	return fault.New(fault.Denied, "session %q is not hosted by runner %q", sessionID, runnerID)
}
