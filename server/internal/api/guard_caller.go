package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// callerRequest turns a validated DecideRequest into the engine's request
// under the caller's terms: whom its kind may name as the actor, what it may
// ask (a user only dry runs, inside what they may read; a bridge only about
// its channels' users and chats), and its runner id and request-id scope.
func (s *GuardService) callerRequest(ctx context.Context, req *guardv1.DecideRequest) (*guard.Request, error) {
	caller, ok := authn.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unauthenticated")
	}
	t, err := termsOf(caller, req)
	if err != nil {
		return nil, err
	}
	if err := s.cardAllowed(req); err != nil {
		return nil, err
	}
	r := guard.FromProto(req)
	r.Actor, r.RunnerID, r.RequireOwnedSession, r.RequestID = t.actor, t.runnerID, t.ownedSession, t.requestID
	switch {
	case caller.Principal.Kind == guardv1.Principal_PRINCIPAL_USER:
		err = s.userMayAsk(ctx, caller.Principal.UserID, r)
	case isBridge(caller):
		err = s.bridgeDecides(ctx, caller, req, r)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// callerTerms is what the caller's kind binds a request to.
type callerTerms struct {
	actor     *guardv1.Actor
	runnerID  string
	requestID string // scoped to the caller's token
	// ownedSession: the actor must be an agent on a session runnerID
	// hosts (the engine checks it against sessions.runner_id).
	ownedSession bool
}

// termsOf: the operator may name any actor; a runner only agents on
// sessions it hosts (its x-clawguard-session agent, or a named session the
// engine checks); a bridge humans (and itself, the system); a user asks dry
// runs only (userMayAsk scopes the actor). Request ids are scoped to the
// caller's token.
func termsOf(c authn.Caller, req *guardv1.DecideRequest) (callerTerms, error) {
	t := callerTerms{actor: req.GetActor(), requestID: scopedRequestID(c, req.GetRequestId())}
	if t.actor == nil && c.Agent == nil {
		return t, InvalidArgument("actor", "required")
	}
	switch c.Principal.Kind {
	case guardv1.Principal_PRINCIPAL_OPERATOR:
	case guardv1.Principal_PRINCIPAL_RUNNER:
		t.runnerID, t.requestID = c.Principal.RunnerID, req.GetRequestId()
		if c.Agent != nil {
			// The header's agent was checked at authentication.
			own := &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: c.Agent.GroupID, SessionId: c.Agent.SessionID}}}
			if t.actor != nil && !proto.Equal(t.actor, own) {
				return t, status.Error(codes.PermissionDenied, "actor: differs from the agent of the x-clawguard-session header")
			}
			t.actor = own
			return t, nil
		}
		a := t.actor.GetAgent()
		if a == nil {
			return t, status.Error(codes.PermissionDenied, "actor: runners may only act for agents on sessions they host")
		}
		if a.GetSessionId() == "" {
			return t, status.Error(codes.PermissionDenied, "actor.agent.session_id: a runner must name the session it hosts")
		}
		t.ownedSession = true
	case guardv1.Principal_PRINCIPAL_BRIDGE:
		switch t.actor.GetKind().(type) {
		case *guardv1.Actor_Human, *guardv1.Actor_System:
		default:
			return t, status.Error(codes.PermissionDenied, "actor: bridges may only assert human users")
		}
	case guardv1.Principal_PRINCIPAL_USER:
		// What-if only (ncl explain, the console).
		if !req.GetDryRun() || req.GetCard() != nil {
			return t, status.Error(codes.PermissionDenied, "user tokens may only ask dry runs (explain)")
		}
	default:
		return t, status.Errorf(codes.PermissionDenied, "%s tokens may not ask the guard", enumword.String(c.Principal.Kind))
	}
	return t, nil
}

// cardAllowed: a card's payload becomes the hold's payload — what the
// approver judges and what runs on approval — so it must be the decided
// request itself. Admin-RPC holds (cli_command) come only from the RPC
// interceptor, in-process: a card for one through Guard.Decide could carry
// another command than the one decided (a group-scoped members.add whose
// approval replays roles.grant).
func (s *GuardService) cardAllowed(req *guardv1.DecideRequest) error {
	c := req.GetCard()
	if c == nil {
		return nil
	}
	if c.GetPayload() != nil && !proto.Equal(c.GetPayload(), req.GetPayload()) {
		return InvalidArgument("card.payload", "must be the decided payload (or unset)")
	}
	if s.d.HeldByTheirRPC[req.GetAction()] {
		return InvalidArgument("card", "admin commands are held by calling the RPC itself, not through Guard.Decide")
	}
	return nil
}

func scopedRequestID(c authn.Caller, id string) string {
	if id == "" {
		return ""
	}
	return c.Principal.TokenID + "/" + id
}
