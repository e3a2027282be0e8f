package api

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Approvals: the hold contract (server/internal/approvals).

func (s *ApprovalsService) List(ctx context.Context, req *guardv1.ListRequest) (*guardv1.ListResponse, error) {
	caller, v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	statusWord, err := enumword.Word(req.GetStatus())
	if err != nil {
		return nil, InvalidArgument("status", "%v", err)
	}
	f := approvals.ListFilter{
		Status:    statusWord,
		Kind:      req.GetKind(),
		GroupID:   req.GetAgentGroupId(),
		Limit:     req.GetLimit(),
		PageToken: req.GetPageToken(),
		Resolved:  req.GetResolved(),
		Resolver:  req.GetResolver(),
	}
	if req.GetSince() != nil {
		f.Since = req.GetSince().AsTime()
	}
	if req.GetEligibleForMe() {
		if f.EligibleFor, err = s.actingUser(ctx, caller, req.GetAsUser()); err != nil {
			return nil, err
		}
	} else if req.GetAsUser() != "" {
		return nil, InvalidArgument("as_user", "only with eligible_for_me")
	}
	holds, next, err := s.d.Approvals.List(ctx, v, f)
	if err != nil {
		return nil, err
	}
	return &guardv1.ListResponse{Holds: holds, NextPageToken: next}, nil
}

func (s *ApprovalsService) Get(ctx context.Context, req *guardv1.GetRequest) (*guardv1.GetResponse, error) {
	_, v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() == "" {
		return nil, InvalidArgument("id", "required")
	}
	return s.d.Approvals.View(ctx, v, req.GetId(), req.GetHistory())
}

func (s *ApprovalsService) Resolve(ctx context.Context, req *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
	caller, _, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() == "" {
		return nil, InvalidArgument("id", "required")
	}
	clicker, err := s.actingUser(ctx, caller, req.GetAsUser())
	if err != nil {
		return nil, err
	}
	h, g, err := s.d.Approvals.ResolveStanding(ctx, approvals.Resolution{
		HoldID: req.GetId(), Outcome: req.GetOutcome(), Clicker: clicker, Reason: req.GetReason(), Choice: req.GetChoice(),
		Channel: resolveChannel(caller, clicker), SteppedUp: steppedUp(caller), ChatTap: chatTap(caller),
		Standing: approvals.Standing{For: req.GetStandingFor().AsDuration(), Session: req.GetStandingSession()},
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.ResolveResponse{Hold: h, StandingGrant: g}, nil
}

// resolveChannel is where a click came from, for the time-to-resolve
// histogram: the console, a bridge's channel (the clicker's namespace), a
// user's own token (ncl or another client) or the operator.
func resolveChannel(caller authn.Caller, clicker string) string {
	switch {
	case caller.Via != "":
		return caller.Via
	case caller.Principal.Kind == guardv1.Principal_PRINCIPAL_BRIDGE:
		return authn.Namespace(clicker)
	case caller.Principal.Kind == guardv1.Principal_PRINCIPAL_USER:
		return "ncl"
	case caller.Principal.Kind == guardv1.Principal_PRINCIPAL_OPERATOR:
		return "operator"
	}
	return "unknown"
}

// steppedUp: the click comes from someone who just proved who they are —
// a console sign-in within the step-up window, or their own token (a user's
// or the operator's) — not a bridge asserting a chat user.
func steppedUp(caller authn.Caller) bool {
	if caller.Via == "console" {
		return !caller.SignedIn.IsZero() && time.Since(caller.SignedIn) < approvals.StepUpWindow
	}
	if caller.Via != "" {
		return false // a chat user a bridge acts for (bridge_as_user): still a bridge's assertion
	}
	k := caller.Principal.Kind
	return k == guardv1.Principal_PRINCIPAL_USER || k == guardv1.Principal_PRINCIPAL_OPERATOR
}

// chatTap: the click is a bridge's assertion of a chat user — the bridge
// itself, or a chat user an admin RPC runs as (bridge_as_user) — not a
// person's own token or console session.
func chatTap(caller authn.Caller) bool {
	return caller.Principal.Kind == guardv1.Principal_PRINCIPAL_BRIDGE || (caller.Via != "" && caller.Via != "console")
}

// WatchCursorHeader is the response header a Watch stream sends once it is
// subscribed: the cursor it starts after.
const WatchCursorHeader = "x-clawguard-cursor"

func (s *ApprovalsService) Watch(req *guardv1.WatchRequest, stream grpc.ServerStreamingServer[guardv1.WatchResponse]) error {
	ctx := stream.Context()
	_, v, err := viewer(ctx)
	if err != nil {
		return err
	}
	if req.GetAfterCursor() < 0 {
		return InvalidArgument("after_cursor", "must not be negative")
	}
	filter := s.d.Approvals.WatchFilter(v, req.GetKind(), req.GetAgentGroupId())
	// The header tells the client the subscription is live and where it
	// starts, so "from now" has a definite meaning for it.
	started := func(from int64) error {
		return stream.SendHeader(metadata.Pairs(WatchCursorHeader, strconv.FormatInt(from, 10)))
	}
	err = s.d.Approvals.FollowFrom(ctx, req.GetAfterCursor(), req.GetFromNow(), filter, started, stream.Send)
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}

// requestKind is a non-catalog hold kind.
var requestKind = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// RequestableKind refuses the kinds grants are checked against — every
// catalog entry's approval action, read from the catalog so a new entry is
// covered the moment it is registered: such holds come only from guard
// decisions, never from Request (a bridge must not be able to mint a
// grant-shaped hold for a command it chose). No catalog: nothing may be
// requested (fail closed).
func RequestableKind(cat *guard.Catalog, kind string) error {
	switch {
	case !requestKind.MatchString(kind):
		return InvalidArgument("kind", "want a lower-case hold kind such as %q or %q", approvals.KindChannelRegistration, approvals.KindOneCLICredential)
	case cat == nil:
		return status.Error(codes.Unavailable, "the guard is not wired (failing closed)")
	case cat.IsApprovalKind(kind):
		return InvalidArgument("kind", "%q holds come only from guard decisions", kind)
	}
	return nil
}

func (s *ApprovalsService) Request(ctx context.Context, req *guardv1.RequestRequest) (*guardv1.RequestResponse, error) {
	caller, _, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if err := RequestableKind(s.d.Catalog, req.GetKind()); err != nil {
		return nil, err
	}
	// A Request asserts nobody (the requester is the system): credential
	// gateways, whose bridge tokens carry no channel, file holds too.
	switch {
	case req.GetCard().GetTitle() == "":
		return nil, InvalidArgument("card.title", "required")
	}
	group, err := s.requestGroup(ctx, req.GetSessionId(), req.GetAgentGroupId())
	if err != nil {
		return nil, err
	}
	card := req.GetCard()
	cr := approvals.CreateRequest{
		Kind:           req.GetKind(),
		Payload:        req.GetPayload(),
		SessionID:      req.GetSessionId(),
		AgentGroupID:   group,
		Requester:      caller.Actor(),
		Rule:           req.GetApproverRule(),
		Scope:          req.GetApproverScope(),
		Title:          card.GetTitle(),
		Question:       card.GetQuestion(),
		Options:        card.GetOptions(),
		DedupKey:       requestDedupKey(req.GetKind(), card.GetDedupKey()),
		OriginChannel:  card.GetOriginChannelType(),
		SweptOnRestart: req.GetSweptOnRestart(),
		// The named-or-admin semantic of channel and sender cards.
		RecordDeliveredTo: card.GetRecordDeliveredTo(),
	}
	if card.GetExpiresAt() != nil {
		cr.ExpiresAt = card.GetExpiresAt().AsTime()
	}
	if cr.Payload == nil {
		cr.Payload = card.GetPayload()
	}
	if r := cr.Rule; r != nil && r.GetKind() == nil {
		cr.Rule = nil
	}
	res, err := s.d.Approvals.Request(ctx, cr)
	if err != nil {
		return nil, err
	}
	return &guardv1.RequestResponse{Hold: res.Hold, Created: res.Created, Undelivered: res.Undelivered}, nil
}

// requestGroup checks a Request's session against its agent group: the
// hold's notices are pushed into that session, so a bridge must not name an
// arbitrary agent's session. With a session and no group, the group is the
// session's.
func (s *ApprovalsService) requestGroup(ctx context.Context, sessionID, groupID string) (string, error) {
	if sessionID == "" {
		return groupID, nil
	}
	sessionGroup, found, err := s.d.SessionGroup(ctx, sessionID)
	if err != nil {
		return "", err
	}
	if !found {
		return "", InvalidArgument("session_id", "no session %q", sessionID)
	}
	if groupID != "" && groupID != sessionGroup {
		return "", InvalidArgument("session_id", "session %q is not a session of agent group %q", sessionID, groupID)
	}
	return sessionGroup, nil
}

// requestDedupKey marks a Request's dedup key as the bridge's own: the
// server stores every key under kind, anchor and session
// (approvals.ScopedDedupKey), and this prefix keeps a Request of a kind the
// server also creates itself (channel_registration) off the server's keys.
func requestDedupKey(kind, key string) string {
	if key == "" {
		return ""
	}
	return "request/" + kind + "/" + key
}

func (s *ApprovalsService) Await(ctx context.Context, req *guardv1.AwaitRequest) (*guardv1.AwaitResponse, error) {
	_, v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() == "" {
		return nil, InvalidArgument("id", "required")
	}
	if req.GetTimeout() != nil && req.GetTimeout().AsDuration() < 0 {
		return nil, InvalidArgument("timeout", "must not be negative")
	}
	if _, err := s.d.Approvals.Get(ctx, v, req.GetId()); err != nil {
		return nil, err
	}
	h, resolved, err := s.d.Approvals.Await(ctx, req.GetId(), req.GetTimeout().AsDuration())
	if err != nil {
		return nil, err
	}
	return &guardv1.AwaitResponse{Hold: h, Resolved: resolved}, nil
}

// viewer is the caller and what it may see of holds.
func viewer(ctx context.Context) (authn.Caller, approvals.Viewer, error) {
	caller, ok := authn.FromContext(ctx)
	if !ok {
		return caller, approvals.Viewer{}, status.Error(codes.Unauthenticated, "unauthenticated")
	}
	switch caller.Principal.Kind {
	case guardv1.Principal_PRINCIPAL_OPERATOR, guardv1.Principal_PRINCIPAL_BRIDGE:
		return caller, approvals.Viewer{All: true}, nil
	case guardv1.Principal_PRINCIPAL_USER:
		return caller, approvals.Viewer{UserID: caller.Principal.UserID}, nil
	case guardv1.Principal_PRINCIPAL_RUNNER:
		v := approvals.Viewer{RunnerID: caller.Principal.RunnerID}
		if caller.Agent != nil {
			v.AgentGroup = caller.Agent.GroupID // an agent sees its own group's holds only
		}
		return caller, v, nil
	}
	return caller, approvals.Viewer{}, status.Error(codes.PermissionDenied, "unknown principal")
}

// actingUser is the user a click or an eligibility question is for: a user
// token is always itself (as_user may only repeat it); operator and bridge
// tokens must name the user (mayResolve then applies to that user), and a
// bridge only a user of its channel namespaces.
func (s *ApprovalsService) actingUser(ctx context.Context, caller authn.Caller, asUser string) (string, error) {
	switch caller.Principal.Kind {
	case guardv1.Principal_PRINCIPAL_USER:
		if asUser != "" && asUser != caller.Principal.UserID {
			return "", status.Error(codes.PermissionDenied, "as_user: a user token acts only as its own user")
		}
		return caller.Principal.UserID, nil
	case guardv1.Principal_PRINCIPAL_OPERATOR, guardv1.Principal_PRINCIPAL_BRIDGE:
		if asUser == "" {
			return "", InvalidArgument("as_user", "%s token acts for a person: name the user who decides (ncl: --as <user>, e.g. --as telegram:dana; or use that user's own token)",
				enumword.WithArticle(enumword.String(caller.Principal.Kind)))
		}
		if isBridge(caller) {
			if err := bridgeAsserts(ctx, s.d.Log, caller, "as_user", asUser); err != nil {
				return "", err
			}
		}
		return asUser, nil
	}
	return "", status.Errorf(codes.PermissionDenied, "%s tokens do not act as a user", enumword.String(caller.Principal.Kind))
}
