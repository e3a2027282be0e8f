package reconnect

import (
	"sync"
	"time"
)

// Current is a long-lived stream's handle for a restart from outside: the
// connection under it moved (its replica sent GOAWAY, or was left for
// another), so the stream is made again on the connection now in use.
type Current struct {
	mu      sync.Mutex
	cancel  func()
	started time.Time
}

// Set records the stream just opened and how to end it.
func (c *Current) Set(cancel func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel, c.started = cancel, time.Now()
}

// Clear forgets the stream (it ended).
func (c *Current) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel = nil
}

// RestartIfBefore ends the stream if it was opened before t (a stream made
// since is already on the new connection); its loop makes it again.
func (c *Current) RestartIfBefore(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel == nil || !c.started.Before(t) {
		return false
	}
	c.cancel()
	c.cancel = nil
	return true
}
