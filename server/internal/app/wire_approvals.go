package app

import (
	"context"

	"github.com/clawguard/clawguard/server/internal/approvals"
)

// Approvals: the hold contract. Start sweeps "swept on restart" holds and
// fixes the event position before serving; Run holds the event fan-out (woken
// by the replica's listener, see buildServices), the expiry sweeper, the
// pending gauges and the webhook.
func wireApprovals(ctx context.Context, d *Parts, s *services) error {
	svc := approvals.New(d.Store.Pool, d.Metrics, d.Log, d.Config)
	if err := svc.Start(ctx); err != nil {
		return err
	}
	d.Approvals = svc
	s.background = append(s.background, svc.Run)
	return nil
}
