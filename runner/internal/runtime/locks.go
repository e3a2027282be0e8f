package runtime

import "sync"

// SessionLocks serialises operations on one session (start, stop, restart)
// without making different sessions wait for each other. The zero value is
// ready to use.
type SessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

type sessionLock struct {
	mu   sync.Mutex
	refs int
}

// Lock locks the session and returns its unlock function.
func (k *SessionLocks) Lock(sessionID string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*sessionLock{}
	}
	e := k.locks[sessionID]
	if e == nil {
		e = &sessionLock{}
		k.locks[sessionID] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.locks, sessionID)
		}
		k.mu.Unlock()
	}
}
