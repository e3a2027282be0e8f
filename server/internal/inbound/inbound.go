// Package inbound routes chat messages that bridges (Telegram, Slack, ...)
// see: it resolves the messaging group, runs the channel-registration flow
// for unknown channels, asks the guard whether an unknown sender may reach a
// wired agent group (senders.admit), and delivers admitted messages to the
// group's session as a durable push. The policy itself lives in the guard's
// catalog (channels.register, senders.admit); this package supplies the
// facts, creates the holds and carries out what approvers decide.
//
// A guard that could not decide (ByGuardFailure, guard.HoldNotCreatedNow) is
// no verdict: the message is Unavailable (the bridge sends it again), and an
// approved admission's or registration's continuation returns
// approvals.ErrRetryLater. It also captures an approver's next direct
// message as a new agent's name or a reject reason.
package inbound

import (
	"context"
	"log/slog"
	"regexp"
	"strings"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/permissions"
)

// Catalog actions consulted here: the permissions domain's entries.
const (
	ActionChannelsRegister = permissions.ChannelsRegister
	ActionSendersAdmit     = permissions.SendersAdmit
)

// Option values of the channel-registration card.
const (
	ChoiceConnectPrefix = "connect:"
	ChoiceNew           = "new"
	ChoiceReject        = "reject"
)

// Decider is the guard engine: one decision per call, holds created when a
// card is supplied and the answer is HOLD.
type Decider interface {
	Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error)
}

// HoldCreator creates a hold in the caller's transaction (approvals).
type HoldCreator interface {
	CreateHoldTx(ctx context.Context, tx pgx.Tx, req approvals.CreateRequest) (approvals.CreateResult, error)
}

// Resolver resolves holds as a user (approvals): the reason capture rejects
// through it, so mayResolve and every check of a click run for the reply too.
type Resolver interface {
	Resolve(ctx context.Context, r approvals.Resolution) (*guardv1.Hold, error)
	DisarmReasonCapture(ctx context.Context, holdID, clicker string) (bool, error)
}

// Service is the inbound router.
type Service struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	guard    func() Decider
	holds    HoldCreator
	resolver Resolver
}

// Config is what New needs. Guard is a function because the engine may be
// wired after this service.
type Config struct {
	Pool     *pgxpool.Pool
	Log      *slog.Logger
	Guard    func() Decider
	Holds    HoldCreator
	Resolver Resolver // nil: reject reasons are not captured
}

// New builds the service.
func New(c Config) *Service {
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Guard == nil {
		c.Guard = func() Decider { return nil }
	}
	return &Service{pool: c.Pool, log: c.Log, guard: c.Guard, holds: c.Holds, resolver: c.Resolver}
}

var userIDPattern = regexp.MustCompile(`^[a-z0-9_-]+:.+$`)

const maxText = 64 << 10

// Validate checks a bridge's message at the edge.
func Validate(m *guardv1.RouteInboundRequest) error {
	switch {
	case strings.TrimSpace(m.GetChannelType()) == "":
		return fault.New(fault.Invalid, "channel_type is required")
	case strings.TrimSpace(m.GetPlatformId()) == "":
		return fault.New(fault.Invalid, "platform_id is required")
	case m.GetSenderUserId() != "" && !userIDPattern.MatchString(m.GetSenderUserId()):
		return fault.New(fault.Invalid, "sender_user_id must be namespaced \"<channel>:<handle>\"")
	case len(m.GetText()) > maxText:
		return fault.New(fault.Invalid, "text longer than %d bytes", maxText)
	}
	// Postgres text and jsonb refuse NUL; refuse it here, by name.
	for field, v := range map[string]string{"channel_type": m.GetChannelType(), "platform_id": m.GetPlatformId(),
		"chat_name": m.GetChatName(), "sender_name": m.GetSenderName(), "message_id": m.GetMessageId(), "text": m.GetText()} {
		if strings.ContainsRune(v, 0) {
			return fault.New(fault.Invalid, "%s contains a NUL character", field)
		}
	}
	return nil
}

func human(userID string) *guardv1.Actor {
	return &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: userID}}}
}

func outcome(o guardv1.RouteOutcome, mg, reason string) *guardv1.RouteInboundResponse {
	return &guardv1.RouteInboundResponse{Outcome: o, MessagingGroupId: mg, Reason: reason}
}

// decide consults the guard; no guard or a failing guard is a deny (fail
// closed), never an allow.
func (s *Service) decide(ctx context.Context, req *guardv1.DecideRequest) *guardv1.DecideResponse {
	g := s.guard()
	if g == nil {
		return &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_DENY, Reason: "guard unavailable (failing closed)"}}
	}
	resp, err := g.Decide(ctx, req)
	if err != nil || resp.GetDecision() == nil {
		s.log.WarnContext(ctx, "guard consult failed; denying", "action", req.GetAction(), "err", err)
		return &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_DENY,
			Reason: guard.ReasonFailClosed, DecidedBy: guard.ByGuardFailure}}
	}
	return resp
}

// undecided reports a deny the guard gave because it could not decide (its
// database unreachable, the decision log refusing rows): not a judgement of
// the message or the click. It is not carried out as one: a routed message
// is answered Unavailable (the bridge sends it again), an approved hold's
// continuation is dispatched again later (approvals.ErrRetryLater).
func undecided(resp *guardv1.DecideResponse) bool {
	return resp.GetDecision().GetDecidedBy() == guard.ByGuardFailure ||
		(resp.GetHoldId() == "" && resp.GetHoldError() == guard.HoldNotCreatedNow)
}

// HoldResolved carries out a resolved hold of a kind this package owns
// (sender_admit, channel_registration); other kinds are ignored. The
// approvals service calls it once per resolution, whichever replica
// resolved the hold.
func (s *Service) HoldResolved(ctx context.Context, hold *guardv1.Hold, o guardv1.Outcome) error {
	switch hold.GetKind() {
	case permissions.SenderAdmitApprovalAction:
		if o == guardv1.Outcome_OUTCOME_APPROVE {
			return s.SenderAdmitApproved(ctx, hold)
		}
		// Reject, expiry, sweep: the message stays dropped; no deny list.
		return nil
	case approvals.KindChannelRegistration:
		return s.ChannelRegistrationResolved(ctx, hold, o)
	}
	return nil
}
