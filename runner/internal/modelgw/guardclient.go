package modelgw

import (
	"context"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/egress"
)

// GuardClient is the runner's Guard: its decisions on the runner's
// DecideStream (each call a decision of its own, with a fresh request id),
// and Approvals.Await for a held one (egress's waiting, shared).
type GuardClient struct {
	DecideFunc func(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error)
	Approvals  guardv1.ApprovalsClient
}

// Decide asks the guard.
func (g *GuardClient) Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	return g.DecideFunc(ctx, req)
}

// Await waits up to wait for a hold's resolution.
func (g *GuardClient) Await(ctx context.Context, holdID string, wait time.Duration) (egress.Resolution, error) {
	return (&egress.GuardClient{Approvals: g.Approvals}).Await(ctx, holdID, wait)
}
