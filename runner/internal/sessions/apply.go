package sessions

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/gateway"
)

// Apply applies one server push (connect.Applier), by kind: a replay goes
// to delivery, a message or notice to the inbox, restart, start and stop
// to the lifecycle. Any push wakes a stopped session.
func (m *Manager) Apply(ctx context.Context, p *guardv1.Push) error {
	if m.fenced.Load() {
		// Nothing is taken while the session may be another runner's; the
		// push is applied once the lease is renewed (or goes to the new host).
		return connect.Retry(ErrFenced)
	}
	s, err := m.Ensure(p.GetSessionId(), p.GetAgentGroupId())
	if err != nil {
		return err
	}
	switch b := p.GetBody().(type) {
	case *guardv1.Push_Replay:
		return m.replay(ctx, s, p.GetId(), b.Replay)
	case *guardv1.Push_Deliver:
		d := b.Deliver
		return m.keep(ctx, s, p.GetId(), &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{
			Id: d.GetMessageId(), FromAgentGroupId: d.GetFromAgentGroupId(), SenderUserId: d.GetSenderUserId(),
			Text: d.GetText(), Payload: d.GetPayload(), At: orNow(p.GetCreatedAt()),
		}}})
	case *guardv1.Push_Notify:
		n := b.Notify
		if n.GetKind() == guardv1.NoticeKind_NOTICE_KIND_TOOLS_CHANGED && m.cfg.OnToolsChanged != nil {
			m.cfg.OnToolsChanged(s.GroupID)
		}
		return m.keep(ctx, s, p.GetId(), &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: &agentv1.Notice{
			Kind: agentv1.NoticeKind(n.GetKind()), Text: n.GetText(), HoldId: n.GetHoldId(), At: orNow(p.GetCreatedAt()),
		}}})
	case *guardv1.Push_Restart:
		return m.applyRestart(ctx, s, b.Restart)
	case *guardv1.Push_Start:
		// Also the end of a freeze: the server sends it when one is lifted.
		if err := m.thaw(s); err != nil {
			return err
		}
		return m.Wake(ctx, s)
	case *guardv1.Push_Stop:
		return m.freeze(ctx, s, b.Stop.GetReason())
	default:
		return errors.New("push with no body this runner understands")
	}
}

// replay runs an approved hold's action through the delivery engine. Not
// done yet (the guard or the database could not be reached) is tried again,
// never acknowledged as done.
func (m *Manager) replay(ctx context.Context, s *Session, pushID string, r *guardv1.ReplayAction) error {
	if err := m.Wake(ctx, s); err != nil {
		m.log.Warn("replay: could not wake the session", "session", s.ID, "err", err)
	}
	out := m.cfg.Engine.Replay(ctx, s.delivery(), r)
	if out.Undecided {
		if _, told := m.retrying.LoadOrStore(pushID, true); !told {
			m.Notify(s.ID, &agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_INFO, HoldId: r.GetHoldId(),
				Text: out.Reason + "; it will be tried again", At: timestamppb.Now()})
		}
		return connect.Retry(fmt.Errorf("replay of hold %s not done yet: %s", r.GetHoldId(), out.Reason))
	}
	m.retrying.Delete(pushID)
	if out.NotHosted {
		// The session moved: its new host replays it. Reported as not
		// applied, so a push still ours (the move not yet committed) is
		// sent again rather than counted done.
		return fmt.Errorf("replay of hold %s refused here, the session is hosted elsewhere: %s", r.GetHoldId(), out.Reason)
	}
	m.log.Info("replayed approved action", "session", s.ID, "hold", r.GetHoldId(),
		"action", r.GetDeliveryAction(), "status", out.Status.String(), "reason", out.Reason)
	return nil // applied: the grant is single-use; the agent was told the outcome
}

// applyRestart restarts the agent on its group's new config, unless it is
// frozen or already runs that config (or a newer one).
func (m *Manager) applyRestart(ctx context.Context, s *Session, r *guardv1.RestartContainer) error {
	if s.frozen.Load() {
		return nil // it starts on the group's config of then, once thawed
	}
	if v := r.GetConfigVersion(); v > 0 && r.GetRebuildImage() && v <= s.version.Load() {
		return nil // that config (or a newer one) is already running
	}
	if err := m.Restart(ctx, s); errors.Is(err, ErrImageBuild) {
		// The running agent is kept, and the failure was reported where
		// the change was applied; building the same config again and
		// again (a package that does not install) helps nobody.
		m.log.Warn("restart push: the group image does not build; the running agent is kept", "session", s.ID, "err", err)
		return nil
	} else if err != nil {
		return err
	}
	return nil
}

// keep puts a pushed item into the session's durable inbox — on disk
// before the push is acknowledged — and wakes the agent for it. A full
// inbox (the agent is not reading) is tried again later, so nothing the
// server handed over is dropped; a frozen agent keeps the item until thawed.
func (m *Manager) keep(ctx context.Context, s *Session, pushID string, item *agentv1.InboxResponse) error {
	err := s.Inbox.Durable(pushID, item)
	if errors.Is(err, gateway.ErrInboxFull) {
		return connect.Retry(err)
	}
	if err != nil {
		return err
	}
	s.touch()
	return m.wakeKept(ctx, s)
}

func orNow(t *timestamppb.Timestamp) *timestamppb.Timestamp {
	if t == nil {
		return timestamppb.Now()
	}
	return t
}
