package api

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
)

// PostChatMessage queues an agent's reply for its session's chat. The
// session is the one the runner asserts (authn checked it hosts it).
func (s *RegistryService) PostChatMessage(ctx context.Context, req *guardv1.PostChatMessageRequest) (*guardv1.PostChatMessageResponse, error) {
	c, err := runnerCaller(ctx)
	if err != nil {
		return nil, err
	}
	if c.Agent == nil || c.Agent.SessionID == "" {
		return nil, status.Error(codes.PermissionDenied, "x-clawguard-session: name the session (hosted by this runner) the message comes from")
	}
	if req.GetSessionId() != "" && req.GetSessionId() != c.Agent.SessionID {
		return nil, InvalidArgument("session_id", "differs from x-clawguard-session")
	}
	if s.d.ChatOut == nil {
		return nil, status.Error(codes.Unavailable, "chat outbox is not wired")
	}
	resp, err := s.d.ChatOut.Post(ctx, c.Agent.SessionID, req.GetKind(), req.GetText())
	return resp, err
}

// WatchChatOutbox streams one channel type's chat messages to its bridge
// (a bridge reads only its own channels' outbox).
func (s *RegistryService) WatchChatOutbox(req *guardv1.WatchChatOutboxRequest, stream grpc.ServerStreamingServer[guardv1.WatchChatOutboxResponse]) error {
	if s.d.ChatOut == nil {
		return status.Error(codes.Unavailable, "chat outbox is not wired")
	}
	ctx := stream.Context()
	if c, ok := authn.FromContext(ctx); ok && isBridge(c) {
		if err := bridgeRoutes(ctx, s.d.Log, c, req.GetChannelType(), ""); err != nil {
			return err
		}
	}
	err := s.d.ChatOut.Follow(ctx, req.GetChannelType(), req.GetAfterCursor(), stream.Send)
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}
