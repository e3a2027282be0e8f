package sessions

import (
	"context"
	"regexp"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// A session's agent names the groups it may message by its group's
// destinations (their local names), read with the group's config.

// Destinations are the session's group's destinations, as last read (read
// now when none were).
func (m *Manager) Destinations(ctx context.Context, sessionID string) []*guardv1.SessionDestination {
	s := m.Get(sessionID)
	if s == nil {
		return nil
	}
	m.mu.Lock()
	d, ok := m.dests[s.GroupID]
	m.mu.Unlock()
	if !ok {
		m.fetch(ctx, s)
		m.mu.Lock()
		d = m.dests[s.GroupID]
		m.mu.Unlock()
	}
	return d
}

// Destination is the group a session's agent means by to: a destination's
// local name → its group's id; a group's id, or a name the group has no
// destination for, as it is (the guard decides on it). A name not known is
// looked up once more (the destinations may have changed since the read).
func (m *Manager) Destination(ctx context.Context, ds delivery.Session, to string) (string, error) {
	find := func(list []*guardv1.SessionDestination) (string, bool) {
		for _, d := range list {
			if d.GetTargetGroup() == to {
				return to, true
			}
			if d.GetName() == to {
				return d.GetTargetGroup(), true
			}
		}
		return to, false
	}
	if groupID.MatchString(to) {
		return to, nil // an id is decided as it is: nothing to look up
	}
	if id, ok := find(m.Destinations(ctx, ds.ID)); ok {
		return id, nil
	}
	s := m.Get(ds.ID)
	if s == nil {
		return to, nil
	}
	m.fetch(ctx, s)
	m.mu.Lock()
	list := m.dests[s.GroupID]
	m.mu.Unlock()
	id, _ := find(list)
	return id, nil
}

// groupID is what a group's id looks like (resources: "ag_" and 16 hex).
var groupID = regexp.MustCompile(`^ag_[0-9a-f]{16}$`)

// AgentContext is who the session's agent is and whom it may message, for
// its instructions (the gateway's ListActions).
func (m *Manager) AgentContext(ctx context.Context, ds delivery.Session) *agentv1.AgentContext {
	out := &agentv1.AgentContext{SessionId: ds.ID, GroupId: ds.GroupID}
	m.mu.Lock()
	if g := m.groups[ds.GroupID]; g != nil {
		out.GroupName = g.GetName()
	}
	m.mu.Unlock()
	for _, d := range m.Destinations(ctx, ds.ID) {
		out.Destinations = append(out.Destinations, &agentv1.AgentDestination{Name: d.GetName(), GroupId: d.GetTargetGroup(), GroupName: d.GetTargetGroupName()})
	}
	return out
}
