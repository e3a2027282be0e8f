package gateway

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// The inbox's log file in the runner's data dir: what OpenInbox loads, what
// Durable syncs before a push is acknowledged, what a taken item is marked
// with, and its compaction.

// OpenInbox opens (or creates) the inbox kept in the log file at path and
// loads every item not yet taken.
func OpenInbox(path string, max int) (*Inbox, error) {
	in := NewInbox(max)
	in.path = path
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			in.load(sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read inbox %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read inbox: %w", err)
	}
	if err := in.rewrite(); err != nil {
		return nil, err
	}
	return in, nil
}

// load applies one log line: "+ <id> <base64 item>" or "- <id>". A torn
// last line (a crash mid-write) is ignored.
func (in *Inbox) load(line string) {
	op, rest, _ := strings.Cut(line, " ")
	switch op {
	case "+":
		id, b64, ok := strings.Cut(rest, " ")
		if !ok || in.pending[id] || in.taken[id] {
			return
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return
		}
		it := &agentv1.InboxResponse{}
		if proto.Unmarshal(raw, it) != nil {
			return
		}
		e := in.newEntry(id, it, !strings.HasPrefix(id, localPrefix))
		if e.key != "" && (in.pending[e.key] || in.taken[e.key]) {
			return
		}
		in.items = append(in.items, e)
		in.hold(e)
	case "-":
		if in.pending[rest] {
			in.release(rest)
			for i, e := range in.items {
				if e.id == rest {
					in.items = slices.Delete(in.items, i, i+1)
					if e.key != "" {
						delete(in.pending, e.key)
						in.remember(e.key)
					}
					break
				}
			}
		}
		in.remember(rest)
	}
}

// rewrite compacts the log to the items held and the taken ids remembered.
func (in *Inbox) rewrite() error {
	tmp := in.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write inbox: %w", err)
	}
	w := bufio.NewWriter(f)
	for _, id := range in.order {
		w.WriteString("- " + id + "\n")
	}
	n := len(in.order)
	for _, e := range in.held() {
		line, err := addLine(e)
		if err != nil {
			f.Close()
			return err
		}
		w.WriteString(line)
		n++
	}
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("write inbox: %w", err)
	}
	if err := os.Rename(tmp, in.path); err != nil {
		return fmt.Errorf("write inbox: %w", err)
	}
	if in.f != nil {
		in.f.Close()
	}
	in.lines = n
	in.f, err = os.OpenFile(in.path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open inbox: %w", err)
	}
	return nil
}

// held is every item not yet taken, in arrival order.
func (in *Inbox) held() []entry {
	all := append([]entry(nil), in.items...)
	for _, s := range in.out {
		all = append(all, s.entry)
	}
	slices.SortFunc(all, func(a, b entry) int { return compare(a.seq, b.seq) })
	return all
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func addLine(e entry) (string, error) {
	raw, err := proto.Marshal(e.item)
	if err != nil {
		return "", fmt.Errorf("encode inbox item: %w", err)
	}
	return "+ " + e.id + " " + base64.StdEncoding.EncodeToString(raw) + "\n", nil
}

// append writes an item to the log (nothing for a memory-only inbox).
func (in *Inbox) append(e entry, sync bool) error {
	if in.f == nil {
		return nil
	}
	line, err := addLine(e)
	if err != nil {
		return err
	}
	if _, err := in.f.WriteString(line); err != nil {
		return fmt.Errorf("append to inbox: %w", err)
	}
	if sync {
		if err := in.f.Sync(); err != nil {
			return fmt.Errorf("sync inbox: %w", err)
		}
	}
	in.lines++
	return nil
}

// Close closes the log file.
func (in *Inbox) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.f == nil {
		return nil
	}
	err := in.f.Close()
	in.f = nil
	return err
}

// markTaken logs that the agent is done with an item (no sync: a machine
// crash may deliver an item again, a runner crash does not) and compacts
// the log when it grew.
func (in *Inbox) markTaken(e entry) {
	in.release(e.id)
	ids := []string{e.id}
	if e.key != "" {
		delete(in.pending, e.key)
		ids = append(ids, e.key)
	}
	for _, id := range ids {
		in.remember(id)
		if in.f != nil {
			if _, err := in.f.WriteString("- " + id + "\n"); err == nil {
				in.lines++
			}
		}
	}
	if in.f != nil && in.lines > 2*(len(in.items)+len(in.out)+len(in.order))+1024 {
		_ = in.rewrite() // on failure the longer log is still correct
	}
}
