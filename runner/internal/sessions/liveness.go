package sessions

import (
	"context"
	"time"
)

// LivenessLoop restarts, every interval, the agents that hold inbox items
// up: sent items they have not acknowledged, or server-promised items
// waiting with no reader, with no progress (an ack, a stream opened, an
// item taken) for the ack deadline. Such an agent is stopped (a SIGSTOPped
// or wedged process) or gone without its runtime noticing; a restarted one
// is sent every item again, so nothing is dropped.
func (m *Manager) LivenessLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.restartStalled(ctx, time.Now())
	}
}

// restartStalled restarts the agents stalled as of now; it returns how many.
func (m *Manager) restartStalled(ctx context.Context, now time.Time) int {
	if m.fenced.Load() {
		return 0
	}
	deadline := m.ackDeadline()
	restarted := 0
	for _, s := range m.List() {
		n, since := s.Inbox.Stalled()
		if n == 0 || now.Sub(since) < deadline || s.frozen.Load() {
			continue // a frozen agent keeps its items until it is thawed
		}
		m.log.Warn("agent holds inbox items without acknowledging them; restarting it (every item is sent again)",
			"session", s.ID, "items", n, "since", since, "ack_deadline", deadline)
		s.Inbox.Restarted() // the next try is a deadline away, whatever this one does
		if m.cfg.Metrics != nil {
			m.cfg.Metrics.InboxStalledRestartsTotal.Inc()
		}
		if err := m.restart(ctx, s, nil); err != nil {
			m.log.Warn("could not restart the stalled agent; trying again after the ack deadline", "session", s.ID, "err", err)
			continue
		}
		restarted++
	}
	return restarted
}

func (m *Manager) ackDeadline() time.Duration {
	if m.cfg.AckDeadline > 0 {
		return m.cfg.AckDeadline
	}
	return 5 * time.Minute
}
