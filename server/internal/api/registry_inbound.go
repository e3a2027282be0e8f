package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/inbound"
)

// RouteInbound takes a chat message from a bridge (or the operator):
// channel registration, sender admission, then delivery (inbound package).
// A bridge routes only chats of its channels, for senders of that channel.
func (s *RegistryService) RouteInbound(ctx context.Context, req *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, error) {
	if s.d.Inbound == nil {
		return nil, status.Error(codes.Unavailable, "inbound routing is not wired")
	}
	if c, ok := authn.FromContext(ctx); ok && isBridge(c) {
		// Malformed input is InvalidArgument first, whoever sends it.
		if err := inbound.Validate(req); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if err := bridgeRoutes(ctx, s.d.Log, c, req.GetChannelType(), req.GetSenderUserId()); err != nil {
			return nil, err
		}
	}
	resp, err := s.d.Inbound.Route(ctx, req)
	return resp, err
}
