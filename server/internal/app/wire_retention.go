package app

import (
	"context"
	"time"

	"github.com/clawguard/clawguard/server/internal/decexport"
	"github.com/clawguard/clawguard/server/internal/retention"
)

// Retention: every replica prunes old decisions and hold events in bounded
// batches, once a minute (SKIP LOCKED lets replicas share the work).
func wireRetention(d *Parts, s *services) {
	p := &retention.Pruner{
		DB:                d.Store.Pool,
		Log:               d.Log,
		DecisionRetention: d.Config.DecisionRetention,
		EventRetention:    d.Config.EventRetention,
		CitationWindow:    d.Config.CitationWindow,
	}
	if d.Config.DecisionExportURL != "" {
		p.Exported = func(ctx context.Context) (time.Time, error) { return decexport.Watermark(ctx, d.Store.Pool) }
	}
	s.background = append(s.background, p.Run)
}
