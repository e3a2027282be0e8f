package main

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// unaryCall is the open loop's call: Guard.Decide, or for -mode health the
// health check on the same connections, answered as an ALLOW so it counts
// like a decision (the floor: transport, the server's interceptors, no guard;
// -mode durable adds a durable commit to it, durable.go).
func unaryCall(mode string, fx *fixture, conns []*grpc.ClientConn) func(ctx context.Context, i int, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	n := len(conns)
	if mode == "openfga" {
		return fx.fga.checker(conns)
	}
	if mode == "health" {
		clients := make([]healthpb.HealthClient, n)
		for i := range clients {
			clients[i] = healthpb.NewHealthClient(conns[i])
		}
		allowed := &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}}
		return func(ctx context.Context, i int, _ *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
			if _, err := clients[i%n].Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				return nil, err
			}
			return allowed, nil
		}
	}
	clients := make([]guardv1.GuardClient, n)
	for i := range clients {
		clients[i] = guardv1.NewGuardClient(conns[i])
	}
	return func(ctx context.Context, i int, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
		return clients[i%n].Decide(ctx, req)
	}
}

func dial(c config, token string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		// As the runner dials: fixed flow-control windows.
		grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(8 << 20)}
	if token != "" { // OpenFGA runs without authentication
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return grpc.NewClient(c.addr, opts...)
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }
