package egress

import (
	"context"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Session is the agent a connection comes from.
type Session struct {
	ID, GroupID string
}

// Dest is a connection's destination as the guard decides it: a
// normalised host (egressrule.NormalizeHost) and a port.
type Dest struct {
	Host string
	Port int
}

// Verdict is the guard's answer about one connection.
type Verdict struct {
	Effect     guardv1.Effect
	Reason     string
	DecisionID string
	// HoldID is a HOLD's hold ("" when none could be made: HoldError says
	// why); Approvers says who may approve it, in words.
	HoldID, HoldError, Approvers string
}

// Decider asks the guard about a connection (net.connect); every call is a
// new decision, logged as such.
type Decider interface {
	Connect(ctx context.Context, s Session, d Dest) (Verdict, error)
}

// Resolution is how a hold ended, as far as the waiting connection knows.
type Resolution struct {
	// Resolved is false when the wait ended with the hold still pending.
	Resolved bool
	Outcome  guardv1.Outcome
	Resolver string
	Reason   string
}

// Awaiter waits up to wait for a hold to be resolved (Approvals.Await).
type Awaiter interface {
	Await(ctx context.Context, holdID string, wait time.Duration) (Resolution, error)
}
