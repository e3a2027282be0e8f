// Package click is an approver's click — Approvals.Resolve — as every
// client of ours sends it (ncl, the Telegram bridge, the console): an answer
// that says "not now" (Unavailable, ResourceExhausted, Aborted: the database
// restarting, out of disk, a failover) is asked again, the same request,
// after the server's RetryInfo hint, for a bounded time, instead of being
// reported as a failed click. Resolve is one transaction, so asking again is
// safe: a click counts once. When an attempt committed but its answer was
// lost, the next one is refused as already resolved; the hold then shows
// this click's resolution, and that is the click's success.
package click

import (
	"context"
	"time"

	"github.com/clawguard/clawguard/proto/retry"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Calls are the two RPCs a click needs, however the client reaches them.
type Calls struct {
	Resolve func(ctx context.Context, req *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error)
	Get     func(ctx context.Context, id string) (*guardv1.Hold, error)
}

// Options bound and describe a click.
type Options struct {
	// For bounds the retries (default DefaultFor): past it the last answer
	// is returned.
	For time.Duration
	// Clicker is the user clicking, when the client knows it (as_user, a
	// bridge's user); "" when the server knows it (a user token).
	Clicker string
	// Earlier counts a resolution this Clicker made before this call as
	// this click's (a chat button pressed twice); otherwise only an attempt
	// of this call that went unanswered does.
	Earlier bool
	// OnRetry is told of each answer that is asked again, and the wait.
	OnRetry func(err error, wait time.Duration)
}

// DefaultFor is how long a click is retried when Options.For is 0.
const DefaultFor = 30 * time.Second

// Result is the outcome of a click.
type Result struct {
	// Hold is the hold as the click left it.
	Hold *guardv1.Hold
	// StandingGrant is the standing grant the click made (nil when none,
	// and when Repeated: the earlier answer carrying it was lost).
	StandingGrant *guardv1.StandingGrant
	// Repeated: the server refused this attempt because an earlier one
	// (whose answer was lost, or Options.Earlier's click) resolved the hold
	// as asked; Hold is read back.
	Repeated bool
	// Retries is how many answers were asked again.
	Retries int
}

// Retryable reports an answer worth asking again unchanged: nothing was
// done, or what was done is recognised when asked again.
func Retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// RetryDelay is a status's RetryInfo delay (0 when it names none).
func RetryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// Resolve sends req, asking again what Retryable says, for up to o.For.
func Resolve(ctx context.Context, c Calls, req *guardv1.ResolveRequest, o Options) (Result, error) {
	if o.For <= 0 {
		o.For = DefaultFor
	}
	deadline := time.Now().Add(o.For)
	// Jittered, so the approvers of one outage do not come back in step;
	// the server's hint is a floor.
	delays := retry.Exponential(200*time.Millisecond, 5*time.Second)
	var res Result
	for {
		resp, err := c.Resolve(ctx, req)
		if err == nil {
			res.Hold, res.StandingGrant = resp.GetHold(), resp.GetStandingGrant()
			return res, nil
		}
		if status.Code(err) == codes.FailedPrecondition && (res.Retries > 0 || o.Earlier) {
			if h, gerr := c.Get(ctx, req.GetId()); gerr == nil && resolvedAsAsked(h, req, o.Clicker) {
				res.Hold, res.Repeated = h, true
				return res, nil
			}
		}
		if !Retryable(err) || ctx.Err() != nil {
			return res, err
		}
		wait := max(delays.NextBackOff(), RetryDelay(err))
		if time.Now().Add(wait).After(deadline) {
			return res, err
		}
		if o.OnRetry != nil {
			o.OnRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-t.C:
		}
		res.Retries++
	}
}

// resolvedAsAsked: the hold is in the state req leads to, by clicker (any
// resolver when the client does not know its own user).
func resolvedAsAsked(h *guardv1.Hold, req *guardv1.ResolveRequest, clicker string) bool {
	byClicker := clicker == "" || h.GetResolver() == clicker
	if !byClicker {
		for _, a := range h.GetApprovals() {
			if a.GetUserId() == clicker {
				byClicker = req.GetOutcome() == guardv1.Outcome_OUTCOME_APPROVE
			}
		}
	}
	switch req.GetOutcome() {
	case guardv1.Outcome_OUTCOME_APPROVE:
		return byClicker && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED && h.GetChoice() == req.GetChoice()
	case guardv1.Outcome_OUTCOME_REJECT:
		return byClicker && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_REJECTED && h.GetReason() == req.GetReason()
	}
	return false
}
