// Package credgate is the client side of a credential hold: a credential
// gateway (the seed's OneCLI bridge) asks Clawguard before it uses a stored
// credential on an agent's behalf, waits for a human's answer, and is told
// approve, reject (with the approver's reason), expire or sweep.
//
// The gateway has a deadline of its own (the agent's HTTP call is waiting).
// Ask files the hold with an expiry Margin before that deadline, so an
// approver who does not answer in time gets the server's "expired" rather
// than a gateway that silently gave up, and the hold is marked swept on
// restart: a server restart resolves it "sweep" (the gateway that asked is
// gone or has given up by then). Anything but Approved means no: the
// gateway must not use the credential, and an error (the server could not
// be reached before the deadline) means no as well.
package credgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Kind is the hold kind of credential holds.
const Kind = "onecli_credential"

// DefaultMargin is how long before the caller's deadline the hold expires:
// more than the server's expiry sweep interval (0.5s) plus a round trip, so
// the "expired" answer arrives while the caller still waits.
const DefaultMargin = 3 * time.Second

// Outcome is how a credential hold ended.
type Outcome int

const (
	// Approved: the gateway may use the credential, once.
	Approved Outcome = iota + 1
	// Rejected by an approver; Decision.Reason may say why.
	Rejected
	// Expired: nobody answered before the hold's expiry.
	Expired
	// Swept: the server restarted while the hold was pending.
	Swept
)

func (o Outcome) String() string {
	switch o {
	case Approved:
		return "approve"
	case Rejected:
		return "reject"
	case Expired:
		return "expire"
	case Swept:
		return "sweep"
	}
	return "unknown"
}

// Decision is the answer to one Ask.
type Decision struct {
	Outcome  Outcome
	HoldID   string
	Resolver string // who approved or rejected ("" for expire and sweep)
	Reason   string // a reject's reason, relayed to the requester
}

// Allowed reports whether the credential may be used.
func (d Decision) Allowed() bool { return d.Outcome == Approved }

// Request describes the credentialed action the gateway wants to perform.
type Request struct {
	// AgentGroupID is the requesting agent's group: its admins are asked
	// (owners and global admins when empty). SessionID, when set, must be a
	// session of that group; the agent is told the outcome there.
	AgentGroupID string
	SessionID    string
	// Title and Question make the approver's card; Title defaults to
	// "Credential use".
	Title    string
	Question string
	// Payload is stored with the hold (e.g. credential name, host, method,
	// path) so the approver sees exactly what would be done.
	Payload map[string]any
	// DedupKey: a live hold with the same key is answered instead of a new one.
	DedupKey string
}

// Client asks over one connection to the server (a bridge or operator token).
type Client struct {
	approvals guardv1.ApprovalsClient
	// Margin before the caller's deadline at which the hold expires
	// (DefaultMargin when zero).
	Margin time.Duration
	// RetryEvery bounds the wait between Await attempts while the server is
	// unreachable (default 500ms).
	RetryEvery time.Duration
}

// New returns a client over conn.
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{approvals: guardv1.NewApprovalsClient(conn)}
}

// ErrNoDeadline is returned when Ask's context has no deadline: a hold
// must expire before its asker gives up.
var ErrNoDeadline = errors.New("credgate: the context needs a deadline (the gateway's own)")

// ErrUndecided is returned (wrapped) when the deadline passed without an
// answer from the server: the credential must not be used.
var ErrUndecided = errors.New("credgate: no answer before the deadline")

// Ask files the credential hold and waits for its outcome until ctx's
// deadline. The hold expires Margin before that deadline.
func (c *Client) Ask(ctx context.Context, req Request) (Decision, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return Decision{}, ErrNoDeadline
	}
	margin := c.Margin
	if margin <= 0 {
		margin = DefaultMargin
	}
	expires := deadline.Add(-margin)
	if !expires.After(time.Now()) {
		return Decision{}, fmt.Errorf("credgate: the deadline (in %s) leaves no time before the %s margin", time.Until(deadline).Round(time.Millisecond), margin)
	}
	payload, err := structpb.NewStruct(req.Payload)
	if err != nil {
		return Decision{}, fmt.Errorf("credgate: payload: %w", err)
	}
	title := req.Title
	if title == "" {
		title = "Credential use"
	}
	res, err := c.approvals.Request(ctx, &guardv1.RequestRequest{
		Kind:         Kind,
		AgentGroupId: req.AgentGroupID,
		SessionId:    req.SessionID,
		Payload:      payload,
		Card: &guardv1.HoldCard{
			Title: title, Question: req.Question, DedupKey: req.DedupKey,
			ExpiresAt: timestamppb.New(expires),
			Options: []*guardv1.HoldOption{
				{Label: "Approve", Value: "approve"}, {Label: "Reject", Value: "reject"},
			},
		},
		SweptOnRestart: true,
	}, grpc.WaitForReady(true))
	if err != nil {
		return Decision{}, fmt.Errorf("credgate: request: %w", err)
	}
	return c.Await(ctx, res.GetHold().GetId())
}

// Await waits for a credential hold's outcome until ctx ends, riding out a
// server restart (the new server sweeps the hold; that is the answer).
func (c *Client) Await(ctx context.Context, holdID string) (Decision, error) {
	every := c.RetryEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	for {
		wait := time.Minute
		if d, ok := ctx.Deadline(); ok {
			// The server answers with the hold as it is just before our
			// deadline, rather than our call failing with DeadlineExceeded.
			wait = max(time.Until(d)-100*time.Millisecond, time.Millisecond)
		}
		res, err := c.approvals.Await(ctx, &guardv1.AwaitRequest{Id: holdID, Timeout: durationpb.New(wait)}, grpc.WaitForReady(true))
		switch {
		case err == nil && res.GetResolved():
			return decision(res.GetHold())
		case err == nil:
			// Still pending at the wait's end: ask again while time is left.
		case ctx.Err() != nil:
			return Decision{HoldID: holdID}, fmt.Errorf("%w (hold %s): %v", ErrUndecided, holdID, err)
		case retryable(err):
			// The server went away (a restart): wait and ask the next one.
		default:
			return Decision{HoldID: holdID}, fmt.Errorf("credgate: await hold %s: %w", holdID, err)
		}
		select {
		case <-ctx.Done():
			return Decision{HoldID: holdID}, fmt.Errorf("%w (hold %s)", ErrUndecided, holdID)
		case <-time.After(retryDelay(err, every)):
		}
	}
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		return true
	}
	return false
}

// retryDelay: a moment after a clean "still pending", a pause after an error.
func retryDelay(err error, every time.Duration) time.Duration {
	if err == nil {
		return 10 * time.Millisecond
	}
	return every
}

// decision maps a resolved hold to its outcome.
func decision(h *guardv1.Hold) (Decision, error) {
	d := Decision{HoldID: h.GetId(), Resolver: h.GetResolver(), Reason: h.GetReason()}
	switch h.GetStatus() {
	case guardv1.HoldStatus_HOLD_STATUS_APPROVED:
		d.Outcome = Approved
	case guardv1.HoldStatus_HOLD_STATUS_REJECTED:
		d.Outcome = Rejected
	case guardv1.HoldStatus_HOLD_STATUS_EXPIRED:
		d.Outcome = Expired
	case guardv1.HoldStatus_HOLD_STATUS_SWEPT:
		d.Outcome = Swept
	default:
		return d, fmt.Errorf("credgate: hold %s resolved with unknown status %s", h.GetId(), h.GetStatus())
	}
	return d, nil
}
