package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// State is what a bridge must not forget across restarts: how far it has
// read each stream, and which chat message shows which hold's card (so a
// resolution edits that card and a replayed event sends no second one).
// It is one small JSON file in the data dir, replaced atomically (write a
// temporary file, fsync, rename) after every change.
type State struct {
	// InboundOffset is the chat's own position in what it receives, for a
	// platform that has one (Telegram's next update id: every update below
	// it has been handled); 0 for one that has none (Slack).
	InboundOffset int64 `json:"update_offset"`
	// WatchCursor is the last Approvals.Watch event handled.
	WatchCursor int64 `json:"watch_cursor"`
	// OutboxCursor is the last chat outbox message delivered.
	OutboxCursor int64 `json:"outbox_cursor"`
	// Cards by hold id: one per approver it was sent to.
	Cards map[string][]Card `json:"cards"`
}

// Card is a hold's card message: the chat it is in, the platform's id of
// the message, and the text it was sent with (an edit adds a line to it).
type Card struct {
	Chat    ID     `json:"chat_id"`
	Message ID     `json:"message_id"`
	Text    string `json:"text"`
}

// ID is a platform's id of a chat or message. State files of the
// Telegram bridge before the shared core stored them as JSON numbers;
// they are read either way.
type ID string

// UnmarshalJSON takes a string or a number.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = ID(s)
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var n json.Number
	if err := d.Decode(&n); err != nil {
		return fmt.Errorf("id: want a string or a number: %w", err)
	}
	if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
		return fmt.Errorf("id %s: not an integer", n)
	}
	*id = ID(n.String())
	return nil
}

// store guards the state and its file.
type store struct {
	path string
	mu   sync.Mutex
	s    State
}

func openStore(dir, name string) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st := &store{path: filepath.Join(dir, name+"-state.json"), s: State{Cards: map[string][]Card{}}}
	b, err := os.ReadFile(st.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	}
	if err := json.Unmarshal(b, &st.s); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt: %w", st.path, err)
	}
	if st.s.Cards == nil {
		st.s.Cards = map[string][]Card{}
	}
	return st, nil
}

// snapshot returns a copy of the state.
func (st *store) snapshot() State {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.s
	c.Cards = make(map[string][]Card, len(st.s.Cards))
	for k, v := range st.s.Cards {
		c.Cards[k] = append([]Card(nil), v...)
	}
	return c
}

// cards are the hold's card messages.
func (st *store) cards(holdID string) []Card {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Card(nil), st.s.Cards[holdID]...)
}

// update applies fn and persists the result; on a write error the change
// is kept in memory only and the error returned (the caller retries).
func (st *store) update(fn func(*State)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	fn(&st.s)
	return st.writeLocked()
}

func (st *store) writeLocked() error {
	b, err := json.MarshalIndent(st.s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(st.path), "."+filepath.Base(st.path)+"-*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), st.path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

func (id ID) String() string { return string(id) }
