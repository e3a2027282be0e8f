package sessions

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// What the runner itself tells an agent, through its inbox.

// SystemSender is the sender of the runner's own messages to an agent.
const SystemSender = "system:clawguard"

// Notify puts a notice into a session's inbox (delivery.Notifier).
func (m *Manager) Notify(sessionID string, n *agentv1.Notice) {
	s := m.Get(sessionID)
	if s == nil {
		m.log.Warn("notice for an unknown session dropped", "session", sessionID, "text", n.GetText())
		return
	}
	s.Inbox.Notice(n)
	s.touch()
}

// NotifyOnce puts a notice about one event into a session's inbox unless
// the inbox already holds or gave one with that key (delivery.Notifier).
func (m *Manager) NotifyOnce(sessionID, key string, n *agentv1.Notice) {
	s := m.Get(sessionID)
	if s == nil {
		m.log.Warn("notice for an unknown session dropped", "session", sessionID, "text", n.GetText())
		return
	}
	s.Inbox.PushOnce(key, &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}})
	s.touch()
}

// OnWake puts a system message into a session's inbox for the agent that
// starts next (handlers.Deps.OnWake): the inbox outlives the container, so
// the restarted agent reads it first thing.
// The id names the one applied action, so the agent gets it once.
func (m *Manager) OnWake(ds delivery.Session, id, text string) {
	s := m.Get(ds.ID)
	if s == nil {
		m.log.Warn("on_wake for an unknown session dropped", "session", ds.ID)
		return
	}
	s.Inbox.PushOnce(id, &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{
		Id: id, SenderUserId: SystemSender, Text: text, At: timestamppb.Now()}}})
	s.touch()
}
