package app

import (
	"github.com/clawguard/clawguard/server/internal/metering"
)

// Models: the model gateway's server side — the runners' routes,
// reservations and settlements — and the sweep that settles, on every
// replica, what no runner settled within an hour (SKIP LOCKED shares it).
func wireModels(d *Parts, s *services) {
	d.Models = metering.New(d.Store.Pool, metering.Options{
		CitationWindow: d.Config.CitationWindow, Metrics: d.Metrics.Models, Log: d.Log,
	})
	s.background = append(s.background, d.Models.SweepLoop)
}
