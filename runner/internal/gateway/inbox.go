package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// ErrInboxFull is returned for a durable item when the inbox is at its
// bound: the caller keeps it (the server's push stays unacknowledged and is
// applied again later) instead of the inbox dropping anything it promised.
var ErrInboxFull = errors.New("agent inbox full")

// Inbox buffers a session's messages and notices until its agent has them.
// It outlives the agent's connections (and its container).
//
// An item is held until the agent is done with it: for an agent that
// acknowledges (InboxRequest.acknowledges), until it acks the item's id —
// an item sent on a stream that ended unacknowledged is sent again, first,
// on the next one; for an older agent, until a stream has written it.
//
// An inbox opened with OpenInbox is also kept in a log file in the runner's
// data dir: an item is written there before Durable returns (synced), and
// marked taken once the agent is done with it, so a runner restart delivers
// every item the agent has not acknowledged. Items are de-duplicated by id,
// and a delivered message also by its sender and message id, so a message
// delivered again under a new push (a re-approved hold whose first approval
// the database forgot) reaches the agent once; the taken ids are remembered
// in the log (the last maxTakenRemembered of them), across restarts.
// Local notices (Push, Notice, Message) are best effort: when the inbox is
// full the oldest one is dropped.
type Inbox struct {
	mu      sync.Mutex
	items   []entry // waiting to be sent, in arrival order
	max     int
	dropped int
	signal  chan struct{} // closed and replaced whenever items arrive
	cancel  context.CancelFunc
	gen     uint64 // the current reader's stream
	seq     uint64
	// progress is when the agent last showed it reads its inbox (a stream
	// opened, an ack, an item taken), for Stalled.
	progress time.Time

	// Persistence (nil f: memory only).
	path    string
	f       *os.File
	pending map[string]bool    // ids (and message keys) in items or out, not yet taken
	out     map[string]*handed // handed to a stream, not yet taken
	taken   map[string]bool    // ids (and message keys) taken, remembered for de-duplication
	order   []string           // taken ids, oldest first (bounded)
	lines   int
}

type entry struct {
	id      string
	key     string // a delivered message's sender and id ("" for others)
	seq     uint64 // arrival order
	at      time.Time
	item    *agentv1.InboxResponse
	durable bool // promised to the server: never dropped
}

// handed is an entry handed to a stream: being written (sending), or written
// to an acknowledging agent and waiting for its ack.
type handed struct {
	entry
	gen     uint64
	sending bool
	since   time.Time
}

// maxTakenRemembered bounds the taken ids kept for de-duplication.
const maxTakenRemembered = 16384

// NewInbox returns a memory-only inbox holding at most max items (default 1024).
func NewInbox(max int) *Inbox {
	if max <= 0 {
		max = 1024
	}
	return &Inbox{max: max, signal: make(chan struct{}), pending: map[string]bool{}, out: map[string]*handed{},
		taken: map[string]bool{}, progress: time.Now()}
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

func (in *Inbox) newEntry(id string, item *agentv1.InboxResponse, durable bool) entry {
	in.seq++
	item.ItemId = id
	e := entry{id: id, seq: in.seq, at: time.Now(), item: item, durable: durable}
	if durable {
		e.key = messageKey(item)
	}
	return e
}

// messageKey identifies a delivered message by its sender and message id,
// whatever push carried it ("" when it has no id). The sender is the
// server's (a group, or a chat user), so no agent can name another
// sender's message and have it dropped.
func messageKey(item *agentv1.InboxResponse) string {
	m := item.GetMessage()
	if m.GetId() == "" {
		return ""
	}
	h := sha256.Sum256([]byte(m.GetFromAgentGroupId() + "\x00" + m.GetSenderUserId() + "\x00" + m.GetId()))
	return "msg:" + hex.EncodeToString(h[:16])
}

func (in *Inbox) hold(e entry) {
	in.pending[e.id] = true
	if e.key != "" {
		in.pending[e.key] = true
	}
}

func (in *Inbox) release(id string) { delete(in.pending, id) }

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

// Durable adds an item the caller will acknowledge to the server once this
// returns nil: it is on disk (synced) before that. An id already held or
// already taken is not added again (a re-sent push), nor is a message whose
// sender and message id were (the same message under another push). A full
// inbox refuses it with ErrInboxFull.
func (in *Inbox) Durable(id string, item *agentv1.InboxResponse) error {
	if err := checkID(id); err != nil {
		return err
	}
	if strings.HasPrefix(id, localPrefix) {
		return fmt.Errorf("inbox: durable item id %q uses the local prefix", id)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pending[id] || in.taken[id] {
		return nil
	}
	if key := messageKey(item); key != "" && (in.pending[key] || in.taken[key]) {
		return nil
	}
	durable := 0
	for _, e := range in.held() {
		if e.durable {
			durable++
		}
	}
	if durable >= in.max {
		return fmt.Errorf("%w (%d items waiting for the agent)", ErrInboxFull, durable)
	}
	e := in.newEntry(id, item, true)
	if err := in.append(e, true); err != nil {
		return err
	}
	in.arrive(e)
	return nil
}

func checkID(id string) error {
	if id == "" || len(id) > 256 || strings.ContainsAny(id, " \n\r") {
		return fmt.Errorf("inbox: bad item id %q", id)
	}
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
	in.hold(e)
	in.wake()
}

func (in *Inbox) wake() {
	close(in.signal)
	in.signal = make(chan struct{})
}

// localPrefix marks the ids of local items (not promised to the server).
const localPrefix = "local_"

// Push appends a local item, logged without a sync (best effort: when the
// inbox is full the oldest local item is dropped; durable ones never are).
func (in *Inbox) Push(item *agentv1.InboxResponse) {
	in.push(localID(), item)
}

// PushOnce is Push for an item the runner may come to give twice (a
// notice about one hold): an item with an id already held or taken is
// not added again. The id is the caller's, stable for the one event.
func (in *Inbox) PushOnce(id string, item *agentv1.InboxResponse) {
	id = localPrefix + id
	if checkID(id) != nil {
		in.Push(item)
		return
	}
	in.push(id, item)
}

func (in *Inbox) push(id string, item *agentv1.InboxResponse) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pending[id] || in.taken[id] {
		return
	}
	e := in.newEntry(id, item, false)
	if len(in.items) >= in.max {
		for i, old := range in.items {
			if !old.durable {
				in.items = slices.Delete(in.items, i, i+1)
				in.release(old.id)
				in.dropped++
				in.markTaken(old)
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
	return localPrefix + hex.EncodeToString(b)
}

// Notice and Message are Push for the two item kinds.
func (in *Inbox) Notice(n *agentv1.Notice) {
	in.Push(&agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}})
}
func (in *Inbox) Message(m *agentv1.InboundMessage) {
	in.Push(&agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: m}})
}

// Len is the number of items held: waiting, or sent and not acknowledged.
func (in *Inbox) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.items) + len(in.out)
}

// Unacked is the number of items sent to the agent and not acknowledged.
func (in *Inbox) Unacked() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, s := range in.out {
		if !s.sending {
			n++
		}
	}
	return n
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
// cancelled (an agent that reconnects replaces its stale stream), and what
// earlier streams sent and the agent never acknowledged is sent again,
// first. It returns the reader's stream generation.
func (in *Inbox) attach(ctx context.Context) (context.Context, uint64, func()) {
	ctx, cancel := context.WithCancel(ctx)
	in.mu.Lock()
	if in.cancel != nil {
		in.cancel()
	}
	in.gen++
	gen := in.gen
	in.cancel = cancel
	in.progress = time.Now()
	in.requeue(func(s *handed) bool { return true })
	in.mu.Unlock()
	return ctx, gen, func() {
		in.mu.Lock()
		if in.gen == gen {
			in.cancel = nil
		}
		// Its stream is gone: what it sent unacknowledged waits again.
		in.requeue(func(s *handed) bool { return s.gen == gen })
		in.mu.Unlock()
		cancel()
	}
}

// requeue puts the sent, unacknowledged items that match back among the
// waiting ones, in arrival order. Items still being written are left to
// their stream (wrote decides).
func (in *Inbox) requeue(match func(*handed) bool) {
	moved := false
	for id, s := range in.out {
		if !s.sending && match(s) {
			delete(in.out, id)
			in.items = append(in.items, s.entry)
			moved = true
		}
	}
	if moved {
		slices.SortFunc(in.items, func(a, b entry) int { return compare(a.seq, b.seq) })
		in.wake()
	}
}

// Attached reports whether an agent is reading the inbox.
func (in *Inbox) Attached() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cancel != nil
}

// next pops the oldest waiting item for the stream gen, waiting for one
// until ctx ends. The item stays held until taken or put back (sent).
func (in *Inbox) next(ctx context.Context, gen uint64) (entry, error) {
	for {
		in.mu.Lock()
		if len(in.items) > 0 {
			e := in.items[0]
			in.items[0] = entry{}
			in.items = in.items[1:]
			in.out[e.id] = &handed{entry: e, gen: gen, sending: true, since: time.Now()}
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

// wrote records the outcome of writing e on stream gen: a failed write puts
// it back; a written one is taken, unless the agent acknowledges (acks),
// when it waits for the ack — or, its stream replaced meanwhile, waits to be
// sent again on the new one.
func (in *Inbox) wrote(e entry, gen uint64, err error, acks bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	s, ok := in.out[e.id]
	if !ok || s.gen != gen {
		return // acknowledged meanwhile
	}
	switch {
	case err != nil:
		delete(in.out, e.id)
		in.items = append([]entry{e}, in.items...)
		slices.SortFunc(in.items, func(a, b entry) int { return compare(a.seq, b.seq) })
		in.wake()
	case !acks:
		delete(in.out, e.id)
		in.progress = time.Now()
		in.markTaken(e)
	default:
		s.sending = false
		s.since = time.Now()
		if in.gen != gen || in.cancel == nil {
			in.requeue(func(x *handed) bool { return x == s })
		}
	}
}

// Ack takes the items the agent acknowledges (their ids as sent in
// item_id) and returns how many it held. Unknown ids are ignored: acked
// already, or never sent.
func (in *Inbox) Ack(ids []string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.progress = time.Now()
	n := 0
	for _, id := range ids {
		if s, ok := in.out[id]; ok {
			delete(in.out, id)
			in.markTaken(s.entry)
			n++
			continue
		}
		// Sent on a stream that has ended, and back among the waiting.
		if i := slices.IndexFunc(in.items, func(e entry) bool { return e.id == id }); i >= 0 && in.pending[id] {
			e := in.items[i]
			in.items = slices.Delete(in.items, i, i+1)
			in.markTaken(e)
			n++
		}
	}
	return n
}

// Stalled reports, for the agent-liveness check, how many items the agent
// holds up and since when it showed no progress on them: items sent and
// not acknowledged (or stuck being written), and server-promised items
// waiting with no reader. Zero items: nothing is waiting on the agent.
func (in *Inbox) Stalled() (int, time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var oldest time.Time
	n := 0
	note := func(t time.Time) {
		if n == 0 || t.Before(oldest) {
			oldest = t
		}
		n++
	}
	for _, s := range in.out {
		note(s.since)
	}
	if in.cancel == nil {
		for _, e := range in.items {
			if e.durable {
				note(e.at)
			}
		}
	}
	if n == 0 {
		return 0, time.Time{}
	}
	if in.progress.After(oldest) {
		oldest = in.progress
	}
	return n, oldest
}

// Restarted tells the inbox its agent was (re)started: the stall clock
// starts over.
func (in *Inbox) Restarted() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.progress = time.Now()
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
