package inbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/store"
)

// messagingGroup is the part of a messaging_groups row routing needs.
type messagingGroup = resources.Chat

// Route takes one chat message from a bridge: a pending reject reason or
// new-agent name reply is captured first; then the chat's messaging group is resolved (or
// created); a denied chat drops; an unwired chat goes to channel
// registration; a wired chat's sender is checked and the message delivered.
func (s *Service) Route(ctx context.Context, m *guardv1.RouteInboundRequest) (_ *guardv1.RouteInboundResponse, err error) {
	defer store.Faulted(&err, "inbound message")
	if err := Validate(m); err != nil {
		return nil, err
	}
	if err := s.upsertSender(ctx, m); err != nil {
		return nil, err
	}
	if resp, handled, err := s.captureReason(ctx, m); err != nil || handled {
		return resp, err
	}
	if resp, handled, err := s.captureName(ctx, m); err != nil || handled {
		return resp, err
	}
	mg, err := s.resolveGroup(ctx, m)
	if err != nil {
		return nil, err
	}
	if mg.Denied {
		if err := s.recordDropped(ctx, mg.ID, m, "channel denied"); err != nil {
			return nil, err
		}
		return outcome(guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED, mg.ID, "channel denied"), nil
	}
	wired, err := s.wiredGroups(ctx, mg.ID)
	if err != nil {
		return nil, err
	}
	if len(wired) == 0 {
		if wired, err = s.carryOutMissedApproval(ctx, mg.ID); err != nil {
			return nil, err
		}
	}
	if len(wired) == 0 {
		return s.requestRegistration(ctx, mg, m)
	}
	return s.routeWired(ctx, mg, wired, m)
}

// routeWired runs the sender check against every wired agent group and
// delivers where admitted. The answer reports the first delivery, else the
// first hold, else the drop.
func (s *Service) routeWired(ctx context.Context, mg messagingGroup, wired []string, m *guardv1.RouteInboundRequest) (*guardv1.RouteInboundResponse, error) {
	var delivered, held, dropped *guardv1.RouteInboundResponse
	for _, ag := range wired {
		r, err := s.admitAndDeliver(ctx, mg, ag, m)
		if err != nil {
			return nil, err
		}
		switch r.GetOutcome() {
		case guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED:
			if delivered == nil {
				delivered = r
			}
		case guardv1.RouteOutcome_ROUTE_OUTCOME_HELD:
			if held == nil {
				held = r
			}
		default:
			if dropped == nil {
				dropped = r
			}
		}
	}
	switch {
	case delivered != nil:
		return delivered, nil
	case held != nil:
		return held, nil
	}
	return dropped, nil
}

func (s *Service) upsertSender(ctx context.Context, m *guardv1.RouteInboundRequest) error {
	if m.GetSenderUserId() == "" {
		return nil
	}
	if err := resources.EnsureUser(ctx, s.pool, m.GetSenderUserId(), m.GetSenderName()); err != nil {
		return fmt.Errorf("record sender %s: %w", m.GetSenderUserId(), err)
	}
	return nil
}

// resolveGroup finds the chat's messaging group or creates it (new chats
// start with the schema's default sender policy, strict).
func (s *Service) resolveGroup(ctx context.Context, m *guardv1.RouteInboundRequest) (messagingGroup, error) {
	return resources.FindOrCreateChatTx(ctx, s.pool, m.GetChannelType(), m.GetPlatformId(), m.GetChatName(), m.GetIsGroup())
}

func (s *Service) wiredGroups(ctx context.Context, mgID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT agent_group_id FROM messaging_group_agents
		WHERE messaging_group_id = $1 ORDER BY created_at, id`, mgID)
	if err != nil {
		return nil, fmt.Errorf("read wirings of %s: %w", mgID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read wirings of %s: %w", mgID, err)
	}
	return ids, nil
}

// recordDropped keeps the message and why it was not routed.
func (s *Service) recordDropped(ctx context.Context, mgID string, m *guardv1.RouteInboundRequest, reason string) error {
	body, err := messageJSON(m)
	if err != nil {
		return err
	}
	var mgArg any
	if mgID != "" {
		mgArg = mgID
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO dropped_messages (messaging_group_id, sender_user_id, reason, message)
		VALUES ($1, $2, $3, $4)`, mgArg, m.GetSenderUserId(), reason, body); err != nil {
		return fmt.Errorf("record dropped message: %w", err)
	}
	s.log.InfoContext(ctx, "inbound message dropped", "messaging_group", mgID, "sender", m.GetSenderUserId(), "reason", reason)
	return nil
}

// messageJSON is the message as stored (dropped_messages, hold payloads,
// pending registrations): the request's protojson form.
func messageJSON(m *guardv1.RouteInboundRequest) ([]byte, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return b, nil
}

func messageMap(m *guardv1.RouteInboundRequest) (map[string]any, error) {
	b, err := messageJSON(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return out, nil
}

// messageFrom decodes a stored message (JSON object).
func messageFrom(b []byte) (*guardv1.RouteInboundRequest, error) {
	if len(b) == 0 {
		return nil, errors.New("no stored message")
	}
	m := &guardv1.RouteInboundRequest{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("decode stored message: %w", err)
	}
	return m, nil
}
