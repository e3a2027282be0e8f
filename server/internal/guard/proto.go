package guard

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// FromProto turns an API request into an engine request (no principal
// context: RunnerID and RequireOwnedSession are the caller's to set).
func FromProto(req *guardv1.DecideRequest) *Request {
	return &Request{
		Input: Input{
			Action:   req.GetAction(),
			Actor:    req.GetActor(),
			Resource: req.GetResource(),
			Payload:  req.GetPayload().AsMap(),
			Grant:    req.GetGrant(),
		},
		RawPayload: req.GetPayload(),
		Card:       req.GetCard(),
		DryRun:     req.GetDryRun(),
		RequestID:  req.GetRequestId(),
	}
}

// DecideProto decides for a trusted in-process caller (inbound routing,
// replays): no principal checks, the request as given.
func (e *Engine) DecideProto(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	return e.Decide(ctx, FromProto(req))
}
