package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

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
