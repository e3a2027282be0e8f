package delivery

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
)

// Applier is the server's ApplyAction (Registry, with the runner's token).
type Applier interface {
	ApplyAction(ctx context.Context, req *guardv1.ApplyActionRequest, opts ...grpc.CallOption) (*guardv1.ApplyActionResponse, error)
}

// applyRetryFor bounds the retries of one ApplyAction (the citation window
// is longer, so a retry within it is still a valid citation).
const applyRetryFor = 60 * time.Second

// applies reports whether the server makes a's change for this call: every
// authorized run of a guarded action, but for an action whose server part
// is only a replay's claim (ApplyReplayOnly) only a replay.
func applies(a Action, c Call) bool {
	return a.CatalogAction != "" && (c.Replay || !a.ApplyReplayOnly)
}

// apply has the server make the action's change: a fresh run cites its
// ALLOW; a replay names the approved hold, and the server decides it and
// applies the payload it holds in one transaction (the answer carries the
// decision). Either way only the keys the runner stamps are added. For a
// fresh run a transport failure (a replica died mid-call) is asked again
// with the same citation (back-off 100 ms doubling to 2 s, for up to
// applyRetryFor) on whichever replica the connection reaches next: the
// server commits citation and change together, so a retry either applies
// it or finds the citation used by the attempt whose answer was lost. A
// replay is not asked again here: its push is (connect), and the server
// answers a hold applied already with what it applied.
func (e *Engine) apply(ctx context.Context, a Action, c Call) (*guardv1.ApplyActionResponse, error) {
	req := &guardv1.ApplyActionRequest{SessionId: c.Session.ID, Action: a.CatalogAction}
	stamps := map[string]string{}
	if a.Stamp != nil {
		stamps = a.Stamp(c)
	}
	if c.Replay {
		req.Grant, req.Payload = c.HoldID, &structpb.Struct{Fields: map[string]*structpb.Value{}}
	} else {
		req.DecisionId, req.Resource, req.Payload = c.DecisionID, c.Resource, copyStruct(c.Payload)
	}
	for k, v := range stamps {
		req.Payload.Fields[k] = structpb.NewStringValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, applyRetryFor)
	defer cancel()
	delays := retry.Exponential(100*time.Millisecond, 2*time.Second)
	for attempt := 0; ; attempt++ {
		res, err := e.Applier.ApplyAction(ctx, req, grpc.WaitForReady(true))
		switch {
		case err == nil:
			return res, nil
		case attempt > 0 && status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "already cited"):
			// Cited means an earlier attempt applied it, its answer lost.
			return &guardv1.ApplyActionResponse{Message: "applied (the answer of an earlier attempt was lost with its server)"}, nil
		case c.Replay || status.Code(err) != codes.Unavailable || ctx.Err() != nil:
			return nil, err
		}
		d := delays.NextBackOff()
		e.log().Warn("apply: server unavailable; asking again", "action", a.CatalogAction, "decision", c.DecisionID, "hold", c.HoldID, "err", err, "in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err // the server's last answer, not the deadline
		case <-t.C:
		}
	}
}

// notApplied is the outcome of an apply that failed. When the server could
// not be reached it is not final (Undecided): a replay is tried again and
// the server answers it whatever the lost attempt did. A session no longer
// placed on this runner moved to another one, which replays it
// (NotHosted); any other refusal is the final answer.
func notApplied(err error, format string, args ...any) Outcome {
	out := Failed(format, args...)
	out.Undecided = Transient(err)
	out.NotHosted = NotHosted(err)
	return out
}

// copyStruct is a shallow copy of p (never nil), so stamping it leaves the
// caller's payload as it was.
func copyStruct(p *structpb.Struct) *structpb.Struct {
	out := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(p.GetFields())+1)}
	for k, v := range p.GetFields() {
		out.Fields[k] = v
	}
	return out
}
