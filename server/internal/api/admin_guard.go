package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// Invoker calls an RPC's handler in-process (the approved-command replay).
type Invoker func(ctx context.Context, fullMethod string, req proto.Message) (any, error)

// AdminGuard is the interceptor that consults the guard for every admin RPC
// (rule admin = true), with the RPC's catalog action and the request as
// payload: operator → host, a runner with x-clawguard-session → that agent
// (its own group filled into omitted group fields under cli_scope = group),
// users → human (open reads only, scoped by the handlers to their roles),
// bridges → system (approval reads only). An agent's held call becomes a cli_command hold holding
// the request; Replay runs it once approved.
type AdminGuard struct {
	d      AdminGuardDeps
	invoke Invoker
}

// NewAdminGuard builds the interceptor; invoke runs a handler for Replay.
func NewAdminGuard(d AdminGuardDeps, invoke Invoker) *AdminGuard {
	return &AdminGuard{d: d, invoke: invoke}
}

var jsonOpts = protojson.MarshalOptions{UseProtoNames: true}

// Unary is the unary server interceptor (after auth and the principal check).
func (g *AdminGuard) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	r := rpcdecl.For(info.FullMethod)
	if r == nil || !r.GetAdmin() {
		return h(ctx, req)
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "%s: request is not a protobuf message", info.FullMethod)
	}
	caller, ok := authn.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unauthenticated")
	}
	if r.GetBridgeAsUser() {
		acting, err := actAs(ctx, g.d.Log, caller, msg)
		if err != nil {
			return nil, err
		}
		caller, ctx = acting, authn.WithCaller(ctx, acting)
		if err := g.groupNamesToIDs(ctx, info.FullMethod, msg); err != nil {
			return nil, err
		}
	}
	return g.guarded(ctx, info.FullMethod, r, caller, msg, "", func(ctx context.Context) (any, error) { return h(ctx, msg) })
}

// groupNamesToIDs replaces a group name in the request's top-level group
// fields by the group's id before the guard sees the request, so its
// group checks are of the group meant (a chat user types "research"). An
// unknown reference stays as typed, for the handler to refuse.
func (g *AdminGuard) groupNamesToIDs(ctx context.Context, fullMethod string, msg proto.Message) error {
	if g.d.GroupID == nil {
		return nil
	}
	m := msg.ProtoReflect()
	for _, path := range rpcdecl.MethodGroupFields(fullMethod) {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(path))
		if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
			continue // nested or repeated: not a field a person types
		}
		ref := m.Get(fd).String()
		if ref == "" {
			continue
		}
		id, err := g.d.GroupID(ctx, ref)
		if err != nil {
			return err
		}
		if id != "" {
			m.Set(fd, protoreflect.ValueOfString(id))
		}
	}
	return nil
}

// actAs is the caller an RPC declaring bridge_as_user runs as: a bridge
// becomes the chat user its request's as_user names (one of its channel
// namespaces' users; the guard then decides for that user, so an owner's
// freeze from chat is the owner's, and a stranger's is denied); any other
// caller stays itself and may name only itself.
func actAs(ctx context.Context, log *slog.Logger, caller authn.Caller, msg proto.Message) (authn.Caller, error) {
	fd := rpcdecl.AsUserField(msg.ProtoReflect().Descriptor())
	if fd == nil {
		return caller, status.Error(codes.Internal, "bridge_as_user: the request has no as_user field")
	}
	asUser := msg.ProtoReflect().Get(fd).String()
	if !isBridge(caller) {
		if asUser != "" && (caller.Principal.Kind != guardv1.Principal_PRINCIPAL_USER || asUser != caller.Principal.UserID) {
			return caller, status.Error(codes.PermissionDenied, "as_user: only a bridge acts for another user")
		}
		return caller, nil
	}
	if asUser == "" {
		return caller, InvalidArgument("as_user", "required for bridge tokens (the chat user)")
	}
	if err := bridgeAsserts(ctx, log, caller, "as_user", asUser); err != nil {
		return caller, err
	}
	return authn.Caller{
		Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_USER, UserID: asUser, TokenID: caller.Principal.TokenID},
		Via:       authn.Namespace(asUser),
	}, nil
}

// Stream refuses admin streaming RPCs (none are declared; fail closed if one appears).
func (g *AdminGuard) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if r := rpcdecl.For(info.FullMethod); r != nil && r.GetAdmin() {
		return status.Errorf(codes.Unimplemented, "%s: admin streaming RPCs are not guarded", info.FullMethod)
	}
	return h(srv, ss)
}

func (g *AdminGuard) guarded(ctx context.Context, fullMethod string, r *guardv1.Rule, caller authn.Caller,
	msg proto.Message, grant string, run func(context.Context) (any, error)) (any, error) {
	if g.d.Engine == nil {
		return nil, status.Error(codes.Unavailable, "the guard is not wired (failing closed)")
	}
	actor := caller.Actor()
	if caller.Agent != nil {
		scope, err := g.d.CLIScope(ctx, caller.Agent.GroupID)
		if err != nil {
			g.d.Log.WarnContext(ctx, "read cli_scope", "group", caller.Agent.GroupID, "err", err)
			return nil, err
		}
		if scope == "group" {
			FillGroup(msg, caller.Agent.GroupID)
		}
	}
	if caller.Agent != nil {
		// A secret written as "<redacted>" keeps the value the server holds:
		// an agent, which can never read that value, cannot keep it either
		// (say, for a command of its choosing).
		if refs := secret.References(msg); len(refs) > 0 {
			return nil, InvalidArgument(refs[0], "an agent cannot keep a secret it cannot read: set the value")
		}
	}
	// The handler's own checks come before the guard: a request the handler
	// would refuse is refused now, never held for a human to approve only to
	// fail once replayed (a hold that can never succeed).
	if g.d.Precheck != nil {
		if err := g.d.Precheck(msg); err != nil {
			if caller.Agent != nil {
				g.d.Log.InfoContext(ctx, "agent's admin call refused before the guard: invalid request", "audit", true,
					"method", fullMethod, "agent_group", caller.Agent.GroupID, "session", caller.Agent.SessionID,
					"why", fault.Message(err))
			}
			return nil, err
		}
	}
	payload, err := messageMap(msg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode request: %v", err)
	}
	req := &guard.Request{Input: guard.Input{Action: r.GetAction(), Actor: actor, Payload: payload, Grant: grant}}
	if caller.Agent != nil && r.GetAccess() == guardv1.Access_ACCESS_APPROVAL && grant == "" {
		card, err := commandCard(fullMethod, r, caller.Agent, msg, payload)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "build hold card: %v", err)
		}
		req.Card = card
	}
	resp, err := g.d.Engine.Decide(ctx, req)
	if err != nil {
		return nil, err // a fault (guard.ErrUnavailable: retry) or the context's: api.Status maps it
	}
	if resp.GetDecision().GetEffect() == guardv1.Effect_EFFECT_ALLOW {
		return run(ctx)
	}
	return nil, refusal(resp, caller.Agent != nil)
}

// refusal is the answer to an admin call the guard did not allow: a hold
// of an agent's call is FailedPrecondition with its ApprovalPending (the
// runner tells the agent), a hold that could not be made says why, and a
// deny is PermissionDenied with its reason.
func refusal(resp *guardv1.DecideResponse, agent bool) error {
	d := resp.GetDecision()
	if d.GetEffect() == guardv1.Effect_EFFECT_HOLD {
		if !agent || resp.GetHoldId() == "" {
			msg := d.GetReason()
			if resp.GetHoldError() != "" {
				msg += ": " + resp.GetHoldError()
			}
			if !agent {
				// Holds only arise for agents; anything else is a guard bug.
				return status.Error(codes.PermissionDenied, msg)
			}
			return status.Error(codes.FailedPrecondition, "approval could not be requested: "+msg)
		}
		st, err := status.New(codes.FailedPrecondition,
			"approval pending (hold "+resp.GetHoldId()+"): approval request sent to admin; you will be notified of the result").
			WithDetails(&guardv1.ApprovalPending{HoldId: resp.GetHoldId(), Reason: d.GetReason()})
		if err != nil {
			return status.Errorf(codes.Internal, "attach approval detail: %v", err)
		}
		return st.Err()
	}
	return status.Error(codes.PermissionDenied, d.GetReason())
}

// FillGroup sets the agent's own group into the request's empty top-level
// group fields (commands.GroupArgs), so a group-scoped agent need not pass it.
func FillGroup(msg proto.Message, group string) {
	m := msg.ProtoReflect()
	fields := m.Descriptor().Fields()
	for _, name := range commands.GroupArgs {
		fd := fields.ByName(protoreflect.Name(name))
		if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() || fd.IsMap() {
			continue
		}
		if m.Get(fd).String() == "" {
			m.Set(fd, protoreflect.ValueOfString(group))
		}
	}
}

// messageMap is a request as the guard's payload: protojson with proto
// field names, decoded to a JSON-shaped map.
func messageMap(msg proto.Message) (map[string]any, error) {
	b, err := jsonOpts.Marshal(msg)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// commandCard is a held admin command's card: the payload keeps the request
// whole (it is replayed), the question shows it with its secrets redacted.
func commandCard(fullMethod string, r *guardv1.Rule, a *authn.Agent, msg proto.Message, request map[string]any) (*guardv1.HoldCard, error) {
	payload, err := structpb.NewStruct(map[string]any{
		"method":  fullMethod,
		"request": request,
		"caller":  map[string]any{"kind": "agent", "agent_group_id": a.GroupID, "session_id": a.SessionID},
	})
	if err != nil {
		return nil, err
	}
	shown, err := messageMap(secret.Redact(msg))
	if err != nil {
		return nil, err
	}
	return &guardv1.HoldCard{
		Kind:     commands.ApprovalAction,
		Title:    "CLI: " + r.GetAction(),
		Question: fmt.Sprintf("Agent group %q wants to run:\n`ncl %s%s`", a.GroupID, strings.ReplaceAll(r.GetAction(), ".", " "), argSummary(shown)),
		Payload:  payload,
	}, nil
}

// maxCardArgs bounds the request shown on a command card.
const maxCardArgs = 4000

// argSummary is the request as the card shows it. Keys print sorted, so an
// agent could pad an early argument to push a later one out of view: the
// bound is generous and a cut says how much is not shown.
func argSummary(req map[string]any) string {
	b, _ := json.Marshal(req)
	if len(b) <= 2 {
		return ""
	}
	s := string(b)
	if len(s) > maxCardArgs {
		s = fmt.Sprintf("%s… [%d more bytes not shown: read the hold's payload before approving]", s[:maxCardArgs], len(s)-maxCardArgs)
	}
	return " " + s
}

// Replay runs an approved cli_command hold: the stored request through the
// same guard and handler, as the stored agent caller, carrying the hold as
// its grant (the baseline is re-checked live; the grant is consumed once).
// A stored caller that does not parse, or that disagrees with the hold's
// session and group, is refused — never run as host (D2) — and the
// requester is told either way.
func (g *AdminGuard) Replay(ctx context.Context, h *guardv1.Hold) error {
	fields := h.GetPayload().AsMap()
	method, _ := fields["method"].(string)
	label := "command"
	r := rpcdecl.For(method)
	if r != nil {
		label = strings.ReplaceAll(r.GetAction(), ".", " ")
	}
	agent, ok := parseCaller(fields["caller"])
	var msg proto.Message
	if ok && r != nil && r.GetAdmin() && agent.SessionID == h.GetSessionId() && agent.GroupID == h.GetAgentGroupId() {
		msg, ok = decodeRequest(method, fields["request"])
	} else {
		ok = false
	}
	if !ok {
		g.d.Log.Warn("cli_command replay refused: malformed caller context", "hold", h.GetId(), "method", method)
		return g.notify(ctx, h, guardv1.NoticeKind_NOTICE_KIND_FAILED,
			fmt.Sprintf("Your `ncl %s` request was approved, but its caller context could not be verified — the replay was refused.", label))
	}
	caller := authn.Caller{
		Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_RUNNER, TokenID: "replay:" + h.GetId()},
		Agent:     agent,
	}
	rctx := authn.WithCaller(ctx, caller)
	out, err := g.guarded(rctx, method, r, caller, msg, h.GetId(), func(ctx context.Context) (any, error) {
		return g.invoke(ctx, method, msg)
	})
	if st := status.Convert(Status(err)); err != nil && st.Code() == codes.Unavailable && RetryDelay(st) > 0 {
		// The guard could not decide the replay (nothing decided, grant
		// unused): dispatch it again later rather than drop the approval.
		return fmt.Errorf("%w: %s", approvals.ErrRetryLater, st.Message())
	}
	if err != nil {
		return g.notify(ctx, h, guardv1.NoticeKind_NOTICE_KIND_FAILED,
			fmt.Sprintf("Your `ncl %s` request was approved, but applying it failed: %s", label, status.Convert(Status(err)).Message()))
	}
	result := ""
	if pm, ok := out.(proto.Message); ok {
		// The agent reads this: the answer as any caller gets it, redacted.
		if b, err := jsonOpts.Marshal(secret.Redact(pm)); err == nil {
			result = "\n" + string(b)
		}
	}
	return g.notify(ctx, h, guardv1.NoticeKind_NOTICE_KIND_RESULT,
		fmt.Sprintf("Your `ncl %s` request was approved and ran.%s", label, result))
}

func (g *AdminGuard) notify(ctx context.Context, h *guardv1.Hold, kind guardv1.NoticeKind, text string) error {
	if h.GetSessionId() == "" {
		return fmt.Errorf("cli_command hold %s has no session to notify", h.GetId())
	}
	return g.d.Notify(ctx, h.GetSessionId(), &guardv1.NotifyAgent{Kind: kind, Text: text, HoldId: h.GetId()})
}

// parseCaller accepts exactly {kind: "agent", agent_group_id, session_id}
// with non-empty strings.
func parseCaller(v any) (*authn.Agent, bool) {
	m, ok := v.(map[string]any)
	if !ok || m["kind"] != "agent" || len(m) != 3 {
		return nil, false
	}
	group, okG := m["agent_group_id"].(string)
	session, okS := m["session_id"].(string)
	if !okG || !okS || group == "" || session == "" {
		return nil, false
	}
	return &authn.Agent{GroupID: group, SessionID: session}, true
}

// decodeRequest rebuilds the stored request as the method's input type.
func decodeRequest(fullMethod string, v any) (proto.Message, bool) {
	name := strings.Replace(strings.TrimPrefix(fullMethod, "/"), "/", ".", 1)
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return nil, false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return nil, false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, false
	}
	if v == nil {
		v = map[string]any{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	msg := mt.New().Interface()
	if err := protojson.Unmarshal(b, msg); err != nil {
		return nil, false
	}
	return msg, true
}
