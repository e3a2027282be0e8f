package mcpface

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// queue is clawguard-mcp's own inbox on disk, an append-only log of JSON
// lines in the session's workspace: every item taken from the runner is
// appended and synced before the runner is told it may forget it (Ack), and
// marked read (synced) before the model is handed it. So an item the
// runner let go of is in the queue, and an item the model was handed is
// marked read: a clawguard-mcp or container restart shows every unread item
// once, and a re-sent item (same id) is recognised, read or not.
//
// The queue holds at most max unread items (and maxBytes of them); a full
// queue refuses more (errQueueFull) and its caller stops taking items, so
// the runner keeps them. The log is compacted to the unread items and the
// last maxRemembered read ids once it has grown well past them.
//
// One process owns a queue at a time: an exclusive lock on <path>.lock.
// The queue is not safe for concurrent use (the inbox serialises it).
type queue struct {
	path     string
	f        *os.File // the log, opened for appending
	lock     *os.File // holds the flock
	max      int
	maxBytes int
	remember int // read ids kept (maxRemembered)

	unread      map[string][]byte // id → its "add" line, for compaction
	order       []string          // unread ids in arrival order (read ones skipped lazily)
	unreadBytes int
	done        map[string]bool // ids read or dropped, remembered for de-duplication
	doneOrder   []string        // oldest first, bounded
	size        int64           // bytes in the log
	broken      bool            // an append failed: rewrite before the next one
}

// record is one line of the log.
type record struct {
	Add  *item  `json:"add,omitempty"`  // an item taken from the runner, unread
	Read string `json:"read,omitempty"` // an id read (or dropped): never shown again
}

// maxRemembered bounds the read ids kept for de-duplication (the runner
// remembers as many taken ones).
const maxRemembered = 16384

// Queue bounds when Config leaves them unset.
const (
	DefaultQueueMax      = 4096
	DefaultQueueMaxBytes = 64 << 20
)

var (
	errQueueFull   = errors.New("clawguard-mcp inbox queue full")
	errQueueLocked = errors.New("another clawguard-mcp holds the inbox queue")
	errQueueClosed = errors.New("clawguard-mcp inbox queue closed")
)

// openQueue opens (or creates) the queue at path, locks it, and returns it
// with its unread items in arrival order. errQueueLocked: another process
// has it.
func openQueue(path string, max, maxBytes int) (*queue, []item, error) {
	if max <= 0 {
		max = DefaultQueueMax
	}
	if maxBytes <= 0 {
		maxBytes = DefaultQueueMaxBytes
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("inbox queue: %w", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("inbox queue lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("%w (%s)", errQueueLocked, path)
		}
		return nil, nil, fmt.Errorf("inbox queue lock: %w", err)
	}
	q := &queue{path: path, lock: lock, max: max, maxBytes: maxBytes, remember: maxRemembered,
		unread: map[string][]byte{}, done: map[string]bool{}}
	var items []item
	if f, err := os.Open(path); err == nil {
		items, err = q.load(f)
		f.Close()
		if err != nil {
			q.close()
			return nil, nil, fmt.Errorf("read inbox queue %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		q.close()
		return nil, nil, fmt.Errorf("read inbox queue: %w", err)
	}
	// Rewritten at once: compacted, and a torn last line (a crash
	// mid-append) is gone before anything is appended after it.
	if err := q.rewrite(); err != nil {
		q.close()
		return nil, nil, err
	}
	return q, items, nil
}

// load applies the log's records; a line that does not parse (a torn
// last one) is skipped.
func (q *queue) load(r io.Reader) ([]item, error) {
	br := bufio.NewReader(r)
	byID := map[string]item{}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var rec record
			if json.Unmarshal(line, &rec) == nil {
				switch {
				case rec.Add != nil && rec.Add.ID != "" && !q.known(rec.Add.ID):
					q.unread[rec.Add.ID] = line
					q.order = append(q.order, rec.Add.ID)
					q.unreadBytes += len(line)
					byID[rec.Add.ID] = *rec.Add
				case rec.Read != "":
					q.forget(rec.Read)
					delete(byID, rec.Read)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	var items []item
	for _, id := range q.order {
		if it, ok := byID[id]; ok && q.unread[id] != nil {
			items = append(items, it)
		}
	}
	return items, nil
}

// known reports whether the item is in the queue (unread) or was read.
func (q *queue) known(id string) bool {
	return q.unread[id] != nil || q.done[id]
}

// full reports whether n more bytes of unread items would not fit. An
// empty queue takes any item (one item cannot wedge it).
func (q *queue) full(n int) bool {
	return len(q.unread) >= q.max || (len(q.unread) > 0 && q.unreadBytes+n > q.maxBytes)
}

// add appends an unread item, synced, or says why not (errQueueFull).
func (q *queue) add(it item) error {
	line, err := json.Marshal(record{Add: &it})
	if err != nil {
		return fmt.Errorf("encode inbox item: %w", err)
	}
	line = append(line, '\n')
	if q.full(len(line)) {
		return fmt.Errorf("%w (%d unread items, %d bytes)", errQueueFull, len(q.unread), q.unreadBytes)
	}
	if err := q.append(line); err != nil {
		return err
	}
	q.unread[it.ID] = line
	q.order = append(q.order, it.ID)
	q.unreadBytes += len(line)
	return nil
}

// read marks items read (or done with unseen), synced: they are never
// shown again, and remembered for de-duplication.
func (q *queue) read(ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	var b []byte
	for _, id := range ids {
		line, err := json.Marshal(record{Read: id})
		if err != nil {
			return fmt.Errorf("encode inbox read: %w", err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := q.append(b); err != nil {
		return err
	}
	for _, id := range ids {
		q.forget(id)
	}
	if q.size > 2*(int64(q.unreadBytes)+int64(len(q.doneOrder))*64)+1<<20 {
		_ = q.rewrite() // on failure the longer log is still correct
	}
	return nil
}

// forget moves an id from unread (if there) to the remembered read ids.
func (q *queue) forget(id string) {
	if line, ok := q.unread[id]; ok {
		delete(q.unread, id)
		q.unreadBytes -= len(line)
	}
	if q.done[id] {
		return
	}
	q.done[id] = true
	q.doneOrder = append(q.doneOrder, id)
	for len(q.doneOrder) > q.remember {
		delete(q.done, q.doneOrder[0])
		q.doneOrder = q.doneOrder[1:]
	}
}

// append writes b to the log and syncs it. A failed append may leave a
// partial line: the log is rewritten from memory before the next one.
func (q *queue) append(b []byte) error {
	if q.lock == nil {
		return errQueueClosed // never written without the lock
	}
	if q.broken {
		if err := q.rewrite(); err != nil {
			return err
		}
	}
	n, err := q.f.Write(b)
	if err == nil {
		err = q.f.Sync()
	}
	if err != nil {
		q.broken = true
		return fmt.Errorf("append to inbox queue: %w", err)
	}
	q.size += int64(n)
	return nil
}

// rewrite replaces the log with the remembered read ids and the unread
// items (written to a temporary file, synced, renamed, the directory
// synced).
func (q *queue) rewrite() error {
	tmp := q.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write inbox queue: %w", err)
	}
	w := bufio.NewWriter(f)
	var size int64
	for _, id := range q.doneOrder {
		line, _ := json.Marshal(record{Read: id})
		n, _ := w.Write(append(line, '\n'))
		size += int64(n)
	}
	live := q.order[:0]
	for _, id := range q.order {
		if line := q.unread[id]; line != nil {
			live = append(live, id)
			n, _ := w.Write(line)
			size += int64(n)
		}
	}
	q.order = live
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write inbox queue: %w", err)
	}
	if err := os.Rename(tmp, q.path); err != nil {
		return fmt.Errorf("write inbox queue: %w", err)
	}
	if d, err := os.Open(filepath.Dir(q.path)); err == nil {
		_ = d.Sync() // the rename (and a new file's name) survive a machine crash
		d.Close()
	}
	af, err := os.OpenFile(q.path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open inbox queue: %w", err)
	}
	if q.f != nil {
		q.f.Close()
	}
	q.f, q.size, q.broken = af, size, false
	return nil
}

// close closes the log and releases the lock.
func (q *queue) close() {
	if q.f != nil {
		q.f.Close()
		q.f = nil
	}
	if q.lock != nil {
		q.lock.Close() // releases the flock
		q.lock = nil
	}
}
