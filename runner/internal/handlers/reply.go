package handlers

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// maxReplyChars is the server's limit on one chat message.
const maxReplyChars = 4096

// checkReply: {"text": "...", "notice": bool}, 1 to 4096 characters.
func checkReply(p *structpb.Struct) error {
	text := delivery.String(p, "text")
	switch {
	case strings.TrimSpace(text) == "":
		return errors.New("reply needs a text")
	case utf8.RuneCountInString(text) > maxReplyChars:
		return errors.New("reply text is longer than 4096 characters")
	}
	return nil
}

// reply queues the agent's message for its session's chat; the chat's
// bridge delivers it.
func (h *handlers) reply(ctx context.Context, c delivery.Call) delivery.Outcome {
	kind := guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_REPLY
	if c.Payload.GetFields()["notice"].GetBoolValue() {
		kind = guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_NOTICE
	}
	ctx = metadata.AppendToOutgoingContext(ctx, SessionHeader, c.Session.ID)
	res, err := h.reg.PostChatMessage(ctx, &guardv1.PostChatMessageRequest{
		SessionId: c.Session.ID, Kind: kind, Text: delivery.String(c.Payload, "text"),
	}, grpc.WaitForReady(true))
	if err != nil {
		return delivery.Failed("reply not sent: %v", errText(err))
	}
	result, _ := structpb.NewStruct(map[string]any{"cursor": float64(res.GetCursor()), "channel_type": res.GetChannelType()})
	return delivery.Done(result, "reply queued for the "+res.GetChannelType()+" chat")
}
