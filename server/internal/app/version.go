package app

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Version is the server's version (main sets it from -ldflags; "dev" by default).
var Version = "dev"

// VersionHeader is the response header carrying the server's version on
// every call, health checks included: `ncl version` reads it without a
// token and without reflection.
const VersionHeader = "x-clawguard-server-version"

func versionUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(VersionHeader, Version))
	return h(ctx, req)
}

func versionStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	_ = ss.SetHeader(metadata.Pairs(VersionHeader, Version))
	return h(srv, ss)
}
