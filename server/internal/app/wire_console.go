package app

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/console"
)

// The approvals console (--console-listen): its own HTTP listener. Every
// read and click runs as the signed-in user through the same principal
// check, guard interceptor and handler as the gRPC call it mirrors (callAs,
// watchAs), so the console adds no authority of its own.
func (s *Server) listenConsole(svc *services) error {
	cfg := s.cfg
	if cfg.ConsoleListen == "" {
		return nil
	}
	tlsCfg, err := consoleTLS(cfg)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.ConsoleListen)
	if err != nil {
		return fmt.Errorf("listen on %s (console): %w", cfg.ConsoleListen, errors.Unwrap(err))
	}
	var sso *console.OIDCConfig
	if cfg.OIDCIssuer != "" {
		secret, err := readSecret(cfg.OIDCClientSecretFile)
		if err != nil {
			return fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		sso = &console.OIDCConfig{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: string(secret), RedirectURL: cfg.OIDCRedirectURL}
	}
	c := console.New(console.Deps{
		Pool: s.deps.Store.Pool, Auth: s.deps.Auth, Log: s.log.With("component", "console"),
		Backend: backend{svc}, SessionTTL: cfg.ConsoleSessionTTL, Secure: tlsCfg != nil, StandingGrantMax: cfg.StandingGrantMax, OIDC: sso,
	})
	s.consoleLis = lis
	s.background = append(s.background, func(ctx context.Context) error { return c.Serve(ctx, lis, tlsCfg) })
	return nil
}

// backend runs console requests as gRPC calls in-process.
type backend struct{ s *services }

// Call runs one unary RPC for caller: the rule's principal check, the domain
// interceptors (the admin guard), then the handler — the chain after
// authentication, which the console's session stands in for.
func (b backend) Call(ctx context.Context, caller authn.Caller, fullMethod string, req proto.Message) (proto.Message, error) {
	ctx = authn.WithCaller(ctx, caller)
	if err := checkPrincipal(ctx, fullMethod); err != nil {
		return nil, err
	}
	info := &grpc.UnaryServerInfo{FullMethod: fullMethod}
	h := func(ctx context.Context, req any) (any, error) {
		return b.s.invoke(ctx, fullMethod, req.(proto.Message))
	}
	chain := b.s.chain.Unary
	for i := len(chain) - 1; i >= 0; i-- {
		next, ic := h, chain[i]
		h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
	}
	resp, err := h(ctx, req)
	if err != nil {
		return nil, edgeError(err) // as the gRPC chain's edgeErrors does
	}
	m, ok := resp.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%s answered %T", fullMethod, resp)
	}
	return m, nil
}

// Watch runs Approvals.Watch for caller, sending each event to send,
// through the stream chain's domain interceptors as a gRPC Watch runs
// (its secrets redacted on the way out).
func (b backend) Watch(ctx context.Context, caller authn.Caller, req *guardv1.WatchRequest, started func() error, send func(*guardv1.WatchResponse) error) error {
	ctx = authn.WithCaller(ctx, caller)
	if err := checkPrincipal(ctx, guardv1.Approvals_Watch_FullMethodName); err != nil {
		return err
	}
	info := &grpc.StreamServerInfo{FullMethod: guardv1.Approvals_Watch_FullMethodName, IsServerStream: true}
	h := func(_ any, ss grpc.ServerStream) error {
		return b.s.approvals.Watch(req, &grpc.GenericServerStream[guardv1.WatchRequest, guardv1.WatchResponse]{ServerStream: ss})
	}
	chain := b.s.chain.Stream
	for i := len(chain) - 1; i >= 0; i-- {
		next, ic := h, chain[i]
		h = func(srv any, ss grpc.ServerStream) error { return ic(srv, ss, info, next) }
	}
	return h(nil, &watchStream{ctx: ctx, started: started, send: send})
}

// watchStream is the server side of an in-process Watch. Watch sends its
// header once subscribed: that is when the console's stream opens.
type watchStream struct {
	grpc.ServerStream
	ctx     context.Context
	started func() error
	send    func(*guardv1.WatchResponse) error
}

func (w *watchStream) Context() context.Context     { return w.ctx }
func (w *watchStream) SendHeader(metadata.MD) error { return w.started() }
func (w *watchStream) SetHeader(metadata.MD) error  { return nil }
func (w *watchStream) SetTrailer(metadata.MD)       {}

func (w *watchStream) SendMsg(m any) error {
	ev, ok := m.(*guardv1.WatchResponse)
	if !ok {
		return fmt.Errorf("watch sent %T", m)
	}
	return w.send(ev)
}
