package a2a

import (
	"context"
	"fmt"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/sessions"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Appliers are the domain's apply steps, handed to the registry at assembly:
// a2a.send delivers the message. The send is decided about its target
// (resource.to), which the registry binds and re-checks through Resource;
// the runner stamps the message id after approval.
func Appliers() []registry.Applier {
	return []registry.Applier{{
		Action: Action,
		Apply:  applySend,
		Resource: func(req *guardv1.ApplyActionRequest) (map[string]string, error) {
			to, err := target(req)
			return map[string]string{"to": to}, err
		},
		Stamped: []string{"id"},
	}}
}

// applySend delivers an agent-to-agent message to the target group's
// active session (opened on a live runner if there is none; the target may
// be on another host). The destination ACL is re-checked here: a citation
// binds session and action, not the target.
func applySend(ctx context.Context, tx pgx.Tx, sess registry.Session, req *guardv1.ApplyActionRequest) (registry.Applied, error) {
	to, err := target(req)
	if err != nil {
		return registry.Applied{}, err
	}
	var exists, allowed bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_groups WHERE id = $2),
		$1 = $2 OR EXISTS (SELECT 1 FROM agent_destinations WHERE agent_group_id = $1 AND target_agent_group_id = $2)`,
		sess.GroupID, to).Scan(&exists, &allowed)
	if err != nil {
		return registry.Applied{}, fmt.Errorf("check destination: %w", err)
	}
	if !exists {
		return registry.Applied{}, fault.New(fault.NotFound, "target agent group %q not found", to)
	}
	if !allowed {
		return registry.Applied{}, fault.New(fault.Denied, "group %q has no destination for %q", sess.GroupID, to)
	}
	text := registry.PayloadString(req, "text")
	if text == "" {
		if c, ok := req.GetPayload().GetFields()["content"]; ok {
			if sv, ok := c.GetKind().(*structpb.Value_StringValue); ok {
				text = sv.StringValue
			} else if b, err := c.MarshalJSON(); err == nil {
				text = string(b)
			}
		}
	}
	messageID := registry.PayloadString(req, "id")
	if messageID == "" {
		messageID = store.NewID("msg_", 10)
	}
	targetSession, err := sessions.FindOrOpenTx(ctx, tx, to, "")
	if err != nil {
		return registry.Applied{}, err
	}
	pushID, err := pushes.EnqueueTx(ctx, tx, targetSession, &guardv1.Push{Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{
		MessageId: messageID, FromAgentGroupId: sess.GroupID, FromSessionId: sess.ID, Text: text, Payload: req.GetPayload(),
	}}})
	if err != nil {
		return registry.Applied{}, err
	}
	if err := sessions.EventTx(ctx, tx, targetSession, "in", "message", map[string]any{
		"message_id": messageID, "from_agent_group_id": sess.GroupID, "from_session_id": sess.ID, "text": text,
	}); err != nil {
		return registry.Applied{}, err
	}
	return registry.Applied{
		Result:  map[string]any{"message_id": messageID, "target_session_id": targetSession, "push_id": pushID},
		Message: "Message delivered.",
	}, nil
}

// target is the target group of a send: resource.to, else the payload's
// to (or the seed's platform_id). A resource naming another target than the
// payload is refused: the decision and the card were about the payload's.
func target(req *guardv1.ApplyActionRequest) (string, error) {
	inPayload := registry.PayloadString(req, "to")
	if inPayload == "" {
		inPayload = registry.PayloadString(req, "platform_id")
	}
	to := req.GetResource()["to"]
	switch {
	case to == "":
		to = inPayload
	case inPayload != "" && inPayload != to:
		return "", fault.New(fault.Invalid, "resource.to %q differs from the payload's target %q", to, inPayload)
	}
	if to == "" {
		return "", fault.New(fault.Invalid, "resource.to: required (the target agent group id)")
	}
	return to, nil
}
