package sessions

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Fence stops every agent this runner runs and keeps any from starting,
// because its lease could not be renewed in time: once the lease expires
// the server may give the sessions to another runner, and a session must
// never have two live agents (fencing by lease time, as leader election
// does). Agents get SIGTERM, and SIGKILL by killBy. Pushes are refused
// (tried again later) until Unfence.
func (m *Manager) Fence(ctx context.Context, killBy time.Time) int {
	m.fenceMu.Lock()
	defer m.fenceMu.Unlock()
	if !m.fenced.Swap(true) && m.cfg.Metrics != nil {
		m.cfg.Metrics.LeaseFencesTotal.Inc()
		m.cfg.Metrics.LeaseFenced.Set(1)
	}
	ctx, cancel := context.WithDeadline(ctx, killBy)
	defer cancel()
	running, err := m.cfg.Runtime.Running(ctx)
	if err != nil {
		// Stop every session then: stopping one not running is no error.
		m.log.Warn("fence: could not list the running agents; stopping every session", "err", err)
		running = nil
		for _, s := range m.List() {
			running = append(running, s.ID)
		}
	}
	var wg sync.WaitGroup
	for _, id := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.cfg.Runtime.Stop(ctx, id); err != nil {
				m.log.Error("fence: could not stop an agent", "session", id, "err", err)
			}
		}()
	}
	wg.Wait()
	for _, id := range running {
		if !slices.Contains(m.stopped, id) {
			m.stopped = append(m.stopped, id)
		}
	}
	m.countRunning()
	return len(running)
}

// Unfence lets agents start again once the lease is renewed: it releases
// the sessions the server moved away meanwhile (Reconcile) and starts again
// the agents the fence stopped whose sessions are still placed here, and
// those with items waiting in their inbox.
func (m *Manager) Unfence(ctx context.Context) {
	m.fenceMu.Lock()
	defer m.fenceMu.Unlock()
	if !m.fenced.Load() {
		return
	}
	m.fenced.Store(false)
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.LeaseFenced.Set(0)
	}
	stopped := m.stopped
	m.stopped = nil
	m.Reconcile(ctx)
	for _, s := range m.List() {
		if n, _ := s.Inbox.Stalled(); n == 0 && !slices.Contains(stopped, s.ID) {
			continue
		}
		if err := m.Wake(ctx, s); err != nil {
			m.log.Warn("lease renewed: could not start the agent again", "session", s.ID, "err", err)
		}
	}
}

// Fenced reports whether agents are kept from running.
func (m *Manager) Fenced() bool { return m.fenced.Load() }
