package app

import (
	"context"
	"io"
	"log/slog"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// run calls the interceptors in order, as grpc.ChainUnaryInterceptor does.
func run(ctx context.Context, chain []grpc.UnaryServerInterceptor, info *grpc.UnaryServerInfo, req any, final grpc.UnaryHandler) (any, error) {
	if len(chain) == 0 {
		return final(ctx, req)
	}
	return chain[0](ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return run(ctx, chain[1:], info, req, final)
	})
}

// The admission interceptor runs before authentication, validation and
// logging: a refused Guard.Decide with no token and an invalid request is
// refused as overloaded, not as unauthenticated or invalid, so none of
// them was paid for; an admitted one goes on through them.
func TestAdmissionComesBeforeAuthenticationAndValidation(t *testing.T) {
	v, err := edge.New(rpcdecl.RequestTypes(rpcdecl.Services...)...)
	if err != nil {
		t.Fatal(err)
	}
	d := &Parts{
		Metrics:   metrics.NewMetrics(metrics.NewRegistry()),
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Auth:      authn.NewAuthenticator(nil),
		Validator: v,
	}
	info := &grpc.UnaryServerInfo{FullMethod: guardv1.Guard_Decide_FullMethodName}
	invalid := &guardv1.DecideRequest{Action: "Not An Action"}
	final := func(context.Context, any) (any, error) {
		t.Fatal("the handler ran for an unauthenticated call")
		return nil, nil
	}

	refuse := func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, status.Error(codes.ResourceExhausted, "overloaded")
	}
	chain := buildChain(d, grpcprom.NewServerMetrics(), refuse, Chain{})
	if _, err := run(context.Background(), chain.Unary, info, invalid, final); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("refused by admission: %v, want ResourceExhausted before auth and validation", err)
	}

	admitted := false
	admit := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		admitted = true
		return h(ctx, req)
	}
	chain = buildChain(d, grpcprom.NewServerMetrics(), admit, Chain{})
	if _, err := run(context.Background(), chain.Unary, info, invalid, final); status.Code(err) != codes.Unauthenticated || !admitted {
		t.Fatalf("admitted: %v (admitted %v), want the chain to go on to authentication", err, admitted)
	}
}
