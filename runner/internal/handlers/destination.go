package handlers

import (
	"context"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// destination rewrites send_message's "to" from a destination's local name
// to its group's id, so what is decided, held and delivered names the group
// (the card shows both); an id, or a name the session has no destination
// for, is decided as written (the guard denies what has no destination).
func (h *handlers) destination(ctx context.Context, s delivery.Session, p *structpb.Struct) (*structpb.Struct, error) {
	to := delivery.String(p, "to")
	if h.d.Destination == nil || to == "" {
		return p, nil
	}
	id, err := h.d.Destination(ctx, s, to)
	if err != nil || id == "" || id == to {
		return p, nil
	}
	out := proto.Clone(p).(*structpb.Struct)
	out.Fields["to"] = structpb.NewStringValue(id)
	return out, nil
}
