package app

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/inbound"
	"github.com/clawguard/clawguard/server/internal/permissions"
)

// Inbound: RouteInbound for bridges. Sender admission asks the guard
// (senders.admit), registration holds come from approvals; approved
// sender_admit and channel_registration holds are carried out by OnApproved
// handlers, rejected registrations by following the hold events.
func wireInbound(d *Parts, s *services) {
	decider := engineDecider{d.Guard}
	svc := inbound.New(inbound.Config{
		Pool:     d.Store.Pool,
		Log:      d.Log.With("component", "inbound"),
		Guard:    func() inbound.Decider { return decider },
		Holds:    d.Approvals,
		Resolver: d.Approvals,
	})
	d.Inbound = svc
	for _, kind := range []string{permissions.SenderAdmitApprovalAction, approvals.KindChannelRegistration} {
		d.Approvals.OnApproved(kind, func(ctx context.Context, h *guardv1.Hold) error {
			return svc.HoldResolved(ctx, h, guardv1.Outcome_OUTCOME_APPROVE)
		})
	}
	s.background = append(s.background, func(ctx context.Context) error {
		return svc.FollowRejections(ctx, d.Approvals)
	})
}

// engineDecider consults the engine as a trusted in-process caller.
type engineDecider struct{ e *guard.Engine }

func (g engineDecider) Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	return g.e.DecideProto(ctx, req)
}
