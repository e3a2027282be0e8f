package handlers

import (
	"context"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// maxReplyChars is the server's limit on one chat message.
const maxReplyChars = 4096

// replySchema: {"text": "...", "notice": bool}, 1 to 4096 characters, not
// all white space.
func replySchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"text"},
		Properties: map[string]*jsonschema.Schema{
			"text": {Type: "string", Pattern: delivery.NonBlank, MaxLength: delivery.Ptr(maxReplyChars),
				Description: fmt.Sprintf("The message (at most %d characters)", maxReplyChars)},
			"notice": {Type: "boolean", Description: "Post it as a notice rather than a reply"},
		},
		PropertyOrder: []string{"text", "notice"},
	}
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
