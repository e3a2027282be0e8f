package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// ErrInboxFull is returned for a durable item when the inbox is at its
// bound: the caller keeps it (the server's push stays unacknowledged and is
// applied again later) instead of the inbox dropping anything it promised.
var ErrInboxFull = errors.New("agent inbox full")

// Inbox buffers a session's messages and notices until its agent takes them.
// It outlives the agent's connections (and its container): an item popped
// by a stream that then fails to send is put back, so a reconnecting agent
// sees it.
//
// An inbox opened with OpenInbox is also kept in a log file in the runner's
// data dir: an item is written there before Add returns (Durable items are
// synced), and marked taken once a stream has handed it to the agent, so a
// runner restart delivers every item not yet taken, each once (items are
// de-duplicated by id, taken ones included). Local notices (Push, Notice,
// Message) are best effort: when the inbox is full the oldest one is dropped.
type Inbox struct {
	mu      sync.Mutex
	items   []entry
	max     int
	dropped int
	signal  chan struct{} // closed and replaced whenever items arrive
	cancel  context.CancelFunc
	gen     uint64

	// Persistence (nil f: memory only).
	path    string
	f       *os.File
	pending map[string]bool  // ids in items or handed out, not yet taken
	out     map[string]entry // handed to a stream, not yet taken
	taken   map[string]bool  // ids taken, remembered for de-duplication
	order   []string         // taken ids, oldest first (bounded)
	lines   int
}

type entry struct {
	id      string
	item    *agentv1.InboxResponse
	durable bool // promised to the server: never dropped
}

// maxTakenRemembered bounds the taken ids kept for de-duplication.
const maxTakenRemembered = 10000

// NewInbox returns a memory-only inbox holding at most max items (default 1024).
func NewInbox(max int) *Inbox {
	if max <= 0 {
		max = 1024
	}
	return &Inbox{max: max, signal: make(chan struct{}), pending: map[string]bool{}, out: map[string]entry{}, taken: map[string]bool{}}
}

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
		in.items = append(in.items, entry{id: id, item: it, durable: !strings.HasPrefix(id, "local_")})
		in.pending[id] = true
	case "-":
		if in.pending[rest] {
			delete(in.pending, rest)
			for i, e := range in.items {
				if e.id == rest {
					in.items = append(in.items[:i], in.items[i+1:]...)
					break
				}
			}
		}
		in.remember(rest)
	}
}

func (in *Inbox) remember(id string) {
	if in.taken[id] {
		return
	}
	in.taken[id] = true
	in.order = append(in.order, id)
	for len(in.order) > maxTakenRemembered {
		delete(in.taken, in.order[0])
		in.order = in.order[1:]
	}
}

// rewrite compacts the log to the items waiting and the taken ids remembered.
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
	waiting := append([]entry(nil), in.items...)
	for _, e := range in.out {
		waiting = append(waiting, e)
	}
	for _, e := range waiting {
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

func addLine(e entry) (string, error) {
	raw, err := proto.Marshal(e.item)
	if err != nil {
		return "", fmt.Errorf("encode inbox item: %w", err)
	}
	return "+ " + e.id + " " + base64.StdEncoding.EncodeToString(raw) + "\n", nil
}

// Durable adds an item the caller will acknowledge to the server once this
// returns nil: it is on disk (synced) before that. An id already waiting or
// already taken is not added again (a re-sent push). A full inbox refuses
// it with ErrInboxFull.
func (in *Inbox) Durable(id string, item *agentv1.InboxResponse) error {
	if id == "" || strings.ContainsAny(id, " \n\r") {
		return fmt.Errorf("inbox: bad item id %q", id)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pending[id] || in.taken[id] {
		return nil
	}
	durable := 0
	for _, e := range in.items {
		if e.durable {
			durable++
		}
	}
	if durable >= in.max {
		return fmt.Errorf("%w (%d items waiting for the agent)", ErrInboxFull, durable)
	}
	e := entry{id: id, item: item, durable: true}
	if err := in.append(e, true); err != nil {
		return err
	}
	in.arrive(e)
	return nil
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

func (in *Inbox) arrive(e entry) {
	in.items = append(in.items, e)
	in.pending[e.id] = true
	close(in.signal)
	in.signal = make(chan struct{})
}

// Push appends a local item, logged without a sync (best effort: when the
// inbox is full the oldest local item is dropped; durable ones never are).
func (in *Inbox) Push(item *agentv1.InboxResponse) {
	e := entry{id: localID(), item: item}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.items) >= in.max {
		for i, old := range in.items {
			if !old.durable {
				in.items = append(in.items[:i], in.items[i+1:]...)
				delete(in.pending, old.id)
				in.dropped++
				in.markTaken(old.id)
				break
			}
		}
	}
	_ = in.append(e, false) // a notice that fails to log still reaches a live agent
	in.arrive(e)
}

func localID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "local_" + hex.EncodeToString(b)
}

// Notice and Message are Push for the two item kinds.
func (in *Inbox) Notice(n *agentv1.Notice) {
	in.Push(&agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}})
}
func (in *Inbox) Message(m *agentv1.InboundMessage) {
	in.Push(&agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: m}})
}

// Len is the number of items waiting.
func (in *Inbox) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.items)
}

// Dropped counts items lost to the bound.
func (in *Inbox) Dropped() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.dropped
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

// attach makes the caller the only reader: an earlier reader's context is
// cancelled (an agent that reconnects replaces its stale stream).
func (in *Inbox) attach(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	in.mu.Lock()
	if in.cancel != nil {
		in.cancel()
	}
	in.gen++
	gen := in.gen
	in.cancel = cancel
	in.mu.Unlock()
	return ctx, func() {
		in.mu.Lock()
		if in.gen == gen {
			in.cancel = nil
		}
		in.mu.Unlock()
		cancel()
	}
}

// Attached reports whether an agent is reading the inbox.
func (in *Inbox) Attached() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cancel != nil
}

// next pops the oldest item, waiting for one until ctx ends. The item stays
// pending until taken (sent) or put back (unread).
func (in *Inbox) next(ctx context.Context) (entry, error) {
	for {
		in.mu.Lock()
		if len(in.items) > 0 {
			e := in.items[0]
			in.items[0] = entry{}
			in.items = in.items[1:]
			in.out[e.id] = e
			in.mu.Unlock()
			return e, nil
		}
		sig := in.signal
		in.mu.Unlock()
		select {
		case <-sig:
		case <-ctx.Done():
			return entry{}, ctx.Err()
		}
	}
}

// took records that the agent has an item: it is gone from the log.
func (in *Inbox) took(e entry) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.pending, e.id)
	delete(in.out, e.id)
	in.markTaken(e.id)
}

// markTaken logs a take (no sync: a machine crash may deliver an item
// again, a runner crash does not) and compacts the log when it grew.
func (in *Inbox) markTaken(id string) {
	in.remember(id)
	if in.f == nil {
		return
	}
	if _, err := in.f.WriteString("- " + id + "\n"); err == nil {
		in.lines++
	}
	if in.lines > 2*(len(in.items)+len(in.order))+1024 {
		_ = in.rewrite() // on failure the longer log is still correct
	}
}

// unread puts an item back at the front (its send failed).
func (in *Inbox) unread(e entry) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.out, e.id)
	in.items = append([]entry{e}, in.items...)
}
