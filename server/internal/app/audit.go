package app

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/enumword"
	"github.com/clawguard/clawguard/server/internal/authn"
)

// The audit of refused calls: one info line per call answered
// PermissionDenied or Unauthenticated, saying who (token, principal, agent,
// peer), what (the method) and why (the status message). The outermost
// interceptor writes the line; an interceptor right after authentication
// tells it who the caller turned out to be.

type callerSlot struct{ caller *authn.Caller }

type callerSlotKey struct{}

func refusedAudit(log *slog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		slot := &callerSlot{}
		resp, err := h(context.WithValue(ctx, callerSlotKey{}, slot), req)
		auditRefused(ctx, log, info.FullMethod, slot, err)
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		slot := &callerSlot{}
		ctx := context.WithValue(ss.Context(), callerSlotKey{}, slot)
		err := h(srv, &wrappedStream{ServerStream: ss, ctx: ctx})
		auditRefused(ss.Context(), log, info.FullMethod, slot, err)
		return err
	}
	return unary, stream
}

// noteCaller records the authenticated caller for the audit line.
func noteCaller(ctx context.Context) {
	slot, ok := ctx.Value(callerSlotKey{}).(*callerSlot)
	if !ok {
		return
	}
	if c, ok := authn.FromContext(ctx); ok {
		slot.caller = &c
	}
}

func noteCallerUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	noteCaller(ctx)
	return h(ctx, req)
}

func noteCallerStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	noteCaller(ss.Context())
	return h(srv, ss)
}

func auditRefused(ctx context.Context, log *slog.Logger, method string, slot *callerSlot, err error) {
	code := status.Code(err)
	if code != codes.PermissionDenied && code != codes.Unauthenticated {
		return
	}
	fields := []any{"audit", true, "method", method, "code", code.String(), "why", status.Convert(err).Message()}
	if c := slot.caller; c != nil {
		fields = append(fields, "principal", enumword.String(c.Principal.Kind), "token", c.Principal.TokenID)
		if c.Principal.RunnerID != "" {
			fields = append(fields, "runner", c.Principal.RunnerID)
		}
		if c.Principal.UserID != "" {
			fields = append(fields, "user", c.Principal.UserID)
		}
		if c.Agent != nil {
			fields = append(fields, "agent_group", c.Agent.GroupID, "session", c.Agent.SessionID)
		}
	} else {
		fields = append(fields, "principal", "unauthenticated")
	}
	if p, ok := peer.FromContext(ctx); ok {
		fields = append(fields, "peer", p.Addr.String())
	}
	log.InfoContext(ctx, "call refused", fields...)
}
