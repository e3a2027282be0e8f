package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	validation "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/protovalidate"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// Chain is the interceptor order of STYLE.md: request id → audit of refused
// calls → metrics → logging → errors not yet a status mapped (edgeErrors)
// → auth (health/reflection skipped) → principal
// check → validation (the protos' protovalidate rules: nothing malformed
// reaches the guard, a handler or the database) → domain interceptors (the
// guard) → recovery. Recovery sits innermost so a panicking handler
// becomes Internal and is still logged and counted by the outer layers.
type Chain struct {
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
}

func buildChain(d *Parts, grpcMetrics *grpcprom.ServerMetrics, admit grpc.UnaryServerInterceptor, extra Chain) Chain {
	logger := interceptorLogger(d.Log)
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(callLevel),
	}
	needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return !rpcdecl.Exempt(c.FullMethod()) })
	recoveryOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		d.Metrics.PanicsTotal.Inc()
		d.Log.ErrorContext(ctx, "panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})

	auditUnary, auditStream := refusedAudit(d.Log)
	c := Chain{
		Unary: []grpc.UnaryServerInterceptor{
			requestIDUnary,
			versionUnary,
			// Admission control, before the audit, metrics, logging, auth
			// and validation a refused decision would otherwise pay for.
			admit,
			auditUnary,
			grpcMetrics.UnaryServerInterceptor(),
			quietHotCalls(d.Log, logging.UnaryServerInterceptor(logger, logOpts...)),
			edgeErrorsUnary,
			selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(d.Auth.Authenticate), needsAuth),
			selector.UnaryServerInterceptor(noteCallerUnary, needsAuth),
			selector.UnaryServerInterceptor(principalUnary, needsAuth),
			validation.UnaryServerInterceptor(d.Validator),
		},
		Stream: []grpc.StreamServerInterceptor{
			requestIDStream,
			versionStream,
			auditStream,
			grpcMetrics.StreamServerInterceptor(),
			logging.StreamServerInterceptor(logger, logOpts...),
			edgeErrorsStream,
			selector.StreamServerInterceptor(auth.StreamServerInterceptor(d.Auth.Authenticate), needsAuth),
			selector.StreamServerInterceptor(noteCallerStream, needsAuth),
			selector.StreamServerInterceptor(principalStream, needsAuth),
			// A bad DecideStream frame costs only its own answer: the handler
			// validates each frame; a failing RecvMsg here would end the stream.
			validation.StreamServerInterceptor(d.Validator, validation.WithIgnoreMessages((&guardv1.DecideStreamRequest{}).ProtoReflect().Type())),
		},
	}
	c.Unary = append(c.Unary, extra.Unary...)
	c.Stream = append(c.Stream, extra.Stream...)
	c.Unary = append(c.Unary, recovery.UnaryServerInterceptor(recoveryOpt))
	c.Stream = append(c.Stream, recovery.StreamServerInterceptor(recoveryOpt))
	return c
}

// edgeErrorsUnary passes every error a handler or the authentication
// returns through api.Status, the one mapping of what went wrong to a code:
// a domain's fault becomes its kind's code and words, nothing reaches a
// client as Unknown carrying a database's text, and a database that cannot
// serve is Unavailable with a retry hint wherever it was met. It sits inside
// logging and metrics, so they see the mapped code.
func edgeErrorsUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	return resp, edgeError(err)
}

// edgeErrorsStream is edgeErrorsUnary for streams.
func edgeErrorsStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return edgeError(h(srv, ss))
}

func edgeError(err error) error { return api.Status(err) }

// callLevel is the level of a call's "finished call" line.
func callLevel(c codes.Code) logging.Level {
	switch c {
	case codes.OK, codes.Canceled, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition,
		codes.PermissionDenied, codes.InvalidArgument, codes.Unauthenticated:
		return logging.LevelDebug
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return logging.LevelError
	}
	return logging.LevelWarn
}

// hotMethods are the unary RPCs on every action's path. The logging
// middleware builds its fields (peer, start time, deadline, duration
// strings) for every call before the level is known — a measurable share
// of Guard.Decide's CPU — though an OK call is only logged at debug.
var hotMethods = map[string]bool{"/guard.v1.Guard/Decide": true}

// quietHotCalls runs the logging middleware as usual, except for a hot
// method while debug is off: then only a call whose outcome is logged
// (warn/error by callLevel) pays for its line, which carries the same
// message and fields as the middleware's.
func quietHotCalls(log *slog.Logger, full grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !hotMethods[info.FullMethod] || log.Enabled(ctx, slog.LevelDebug) {
			return full(ctx, req, info, h)
		}
		start := time.Now()
		resp, err := h(ctx, req)
		code := status.Code(err)
		lvl := slog.Level(callLevel(code))
		if !log.Enabled(ctx, lvl) {
			return resp, err
		}
		service, method, _ := strings.Cut(strings.TrimPrefix(info.FullMethod, "/"), "/")
		fields := append(logging.ExtractFields(ctx),
			"grpc.component", "server", "grpc.service", service, "grpc.method", method, "grpc.method_type", "unary",
			"grpc.start_time", start.Format(time.RFC3339), "grpc.code", code.String(),
			"grpc.time_ms", fmt.Sprintf("%v", float32(time.Since(start).Nanoseconds()/1000)/1000))
		if p, ok := peer.FromContext(ctx); ok {
			fields = append(fields, "peer.address", p.Addr.String())
		}
		if d, ok := ctx.Deadline(); ok {
			fields = append(fields, "grpc.request.deadline", d.Format(time.RFC3339))
		}
		if err != nil {
			fields = append(fields, "grpc.error", fmt.Sprintf("%v", err))
		}
		log.Log(ctx, lvl, "finished call", fields...)
		return resp, err
	}
}

// principalUnary refuses principals the method's rule does not list.
func principalUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := checkPrincipal(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func principalStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := checkPrincipal(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

func checkPrincipal(ctx context.Context, fullMethod string) error {
	r := rpcdecl.For(fullMethod)
	if r == nil {
		// Fail closed: an undeclared method is never callable (the boot
		// check refuses to start with one, this is the second fence).
		return status.Errorf(codes.Unimplemented, "%s declares no rule", fullMethod)
	}
	caller, ok := authn.FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "unauthenticated")
	}
	if !rpcdecl.Allows(r, caller.Principal.Kind) {
		return status.Errorf(codes.PermissionDenied, "%s tokens may not call %s", enumword.String(caller.Principal.Kind), r.GetAction())
	}
	return nil
}

type requestIDKey struct{}

func withRequestID(ctx context.Context) context.Context {
	id := ""
	// One key, not FromIncomingContext's copy of every header (a copy per
	// call on Guard.Decide's path).
	if v := metadata.ValueFromIncomingContext(ctx, "x-request-id"); len(v) > 0 && len(v[0]) <= 64 {
		id = v[0]
	}
	if id == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	ctx = context.WithValue(ctx, requestIDKey{}, id)
	return logging.InjectFields(ctx, logging.Fields{"request_id", id})
}

func requestIDUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(withRequestID(ctx), req)
}

func requestIDStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &wrappedStream{ServerStream: ss, ctx: withRequestID(ss.Context())})
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

func interceptorLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}
