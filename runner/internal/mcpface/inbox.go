package mcpface

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// Acker tells the runner it may forget inbox items (AgentGateway.Ack):
// clawguard-mcp calls it once the items are in its own queue on disk.
type Acker interface {
	Ack(ctx context.Context, ids []string) error
}

// AckFunc is a function as an Acker.
type AckFunc func(ctx context.Context, ids []string) error

// Ack calls f.
func (f AckFunc) Ack(ctx context.Context, ids []string) error { return f(ctx, ids) }

// item is one inbox item as the model is shown it.
type item struct {
	ID   string         `json:"id"`
	Kind string         `json:"kind"` // message, held, approved, rejected, result, denied, failed, warning, info
	Text string         `json:"text,omitempty"`
	From string         `json:"from_agent_group_id,omitempty"`
	User string         `json:"sender_user_id,omitempty"`
	Hold string         `json:"hold_id,omitempty"`
	Req  string         `json:"request_id,omitempty"`
	Data map[string]any `json:"payload,omitempty"`
	// Result is an approved action's result (for a guarded MCP tool, its
	// CallToolResult).
	Result map[string]any `json:"result,omitempty"`
	At     string         `json:"at,omitempty"`
}

// itemID is the key of an inbox item: the runner's item_id (the same every
// time the item is sent), else — a runner from before item ids — a
// message's id, else a digest of the notice.
func itemID(r *agentv1.InboxResponse) string {
	if id := r.GetItemId(); id != "" {
		return id
	}
	if m := r.GetMessage(); m != nil && m.GetId() != "" {
		return "m:" + m.GetId()
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	sum := sha256.Sum256(b)
	return "n:" + hex.EncodeToString(sum[:12])
}

var kindWords = map[agentv1.NoticeKind]string{
	agentv1.NoticeKind_NOTICE_KIND_HELD:     "held",
	agentv1.NoticeKind_NOTICE_KIND_DENIED:   "denied",
	agentv1.NoticeKind_NOTICE_KIND_APPROVED: "approved",
	agentv1.NoticeKind_NOTICE_KIND_REJECTED: "rejected",
	agentv1.NoticeKind_NOTICE_KIND_RESULT:   "result",
	agentv1.NoticeKind_NOTICE_KIND_FAILED:   "failed",
	agentv1.NoticeKind_NOTICE_KIND_INFO:     "info",
	agentv1.NoticeKind_NOTICE_KIND_WARNING:  "warning",
}

func toItem(id string, r *agentv1.InboxResponse) item {
	at := func(ts *timestamppb.Timestamp) string {
		if ts == nil {
			return ""
		}
		return ts.AsTime().UTC().Format("2006-01-02T15:04:05Z")
	}
	if m := r.GetMessage(); m != nil {
		return item{ID: id, Kind: "message", Text: m.GetText(), From: m.GetFromAgentGroupId(), User: m.GetSenderUserId(),
			Data: m.GetPayload().AsMap(), At: at(m.GetAt())}
	}
	n := r.GetNotice()
	kind := kindWords[n.GetKind()]
	if kind == "" {
		kind = "info"
	}
	return item{ID: id, Kind: kind, Text: n.GetText(), Hold: n.GetHoldId(), Req: n.GetRequestId(),
		Result: n.GetResult().AsMap(), At: at(n.GetAt())}
}

// inbox is what the model has to read: the unread items of the queue (in
// arrival order) and the notices clawguard-mcp itself has to say, with the
// notices of tool calls still being answered held back.
type inbox struct {
	mu      sync.Mutex
	q       *queue // nil until open (another clawguard-mcp may hold it)
	pending []item // shown at the next read
	own     map[string]bool
	signal  chan struct{} // closed and replaced when items arrive
	room    chan struct{} // closed and replaced when a read frees room in the queue
	calls   map[string]*call
	onNew   func(item) // called (outside the lock) for each new item
}

// call is a tool call whose Send is in flight: its notices are held back
// until the call answers (the answer said it all: they are dropped) or
// gives up waiting (the outcome will come as a notice: they are let in).
type call struct {
	held     []item
	answered bool
}

func newInbox(onNew func(item)) *inbox {
	return &inbox{own: map[string]bool{}, signal: make(chan struct{}), room: make(chan struct{}),
		calls: map[string]*call{}, onNew: onNew}
}

// open makes q the inbox's queue; its unread items come first.
func (in *inbox) open(q *queue, unread []item) {
	in.mu.Lock()
	in.q = q
	in.pending = append(unread, in.pending...)
	if len(unread) > 0 {
		in.wake()
	}
	in.mu.Unlock()
}

// close closes the queue.
func (in *inbox) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.q != nil {
		in.q.close()
	}
}

// add takes one item from the runner into the queue. It returns nil once
// the item is in the queue on disk — or was already (a re-sent item, read
// or not), or is done with unseen (the notice of a call the model has its
// answer for): then the runner may forget it. A full queue makes add wait
// for the model to read (the runner keeps the item meanwhile) until ctx
// ends; a queue that cannot be written returns the error.
func (in *inbox) add(ctx context.Context, id string, r *agentv1.InboxResponse) error {
	it := toItem(id, r)
	for {
		in.mu.Lock()
		if in.q.known(id) {
			in.mu.Unlock()
			return nil
		}
		c := in.calls[it.Req]
		if it.Req == "" {
			c = nil
		}
		if c != nil && c.answered {
			err := in.q.read(id)
			in.mu.Unlock()
			return err
		}
		err := in.q.add(it)
		if errors.Is(err, errQueueFull) {
			room := in.room
			in.mu.Unlock()
			select {
			case <-room:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err != nil {
			in.mu.Unlock()
			return err
		}
		if c != nil {
			c.held = append(c.held, it)
			in.mu.Unlock()
			return nil
		}
		in.arrive(it)
		in.mu.Unlock()
		in.onNew(it)
		return nil
	}
}

// consumed marks an item done without showing it (a notice clawguard-mcp
// acts on itself); nil once that is on disk.
func (in *inbox) consumed(id string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.q.read(id)
}

func (in *inbox) arrive(it item) {
	in.pending = append(in.pending, it)
	in.wake()
}

func (in *inbox) wake() {
	close(in.signal)
	in.signal = make(chan struct{})
}

// local adds an item clawguard-mcp itself has to say (a tool it could not
// offer, for one): not in the queue (a restarted clawguard-mcp says it
// again if it still holds), never acknowledged.
func (in *inbox) local(text string) {
	r := &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: &agentv1.Notice{
		Kind: agentv1.NoticeKind_NOTICE_KIND_INFO, Text: text, At: timestamppb.Now()}}}
	it := toItem("clawguard-mcp:"+itemID(r), r)
	in.mu.Lock()
	if in.own[it.ID] {
		in.mu.Unlock()
		return
	}
	in.own[it.ID] = true
	in.arrive(it)
	in.mu.Unlock()
	in.onNew(it)
}

// begin marks a tool call's request id in flight.
func (in *inbox) begin(requestID string) {
	in.mu.Lock()
	in.calls[requestID] = &call{}
	in.mu.Unlock()
}

// answered ends a call the model got its answer for: its notices, held
// back or still to come, are marked read unseen. The mark is kept for
// notices that arrive after the answer.
func (in *inbox) answered(requestID string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	var err error
	if c := in.calls[requestID]; c != nil {
		if len(c.held) > 0 { // only items from the runner: the queue is open
			err = in.q.read(ids(c.held)...)
		}
		if err == nil {
			in.freed()
		}
		c.answered, c.held = true, nil
	}
	in.pruneCalls()
	return err
}

// unanswered ends a call that gave up waiting: its notices are the
// outcome, and reach the model like any others.
func (in *inbox) unanswered(requestID string) {
	in.mu.Lock()
	c := in.calls[requestID]
	delete(in.calls, requestID)
	var held []item
	if c != nil {
		held = c.held
		for _, it := range held {
			in.arrive(it)
		}
	}
	in.mu.Unlock()
	for _, it := range held {
		in.onNew(it)
	}
}

// maxCalls bounds the answered calls remembered for late notices.
const maxCalls = 1024

func (in *inbox) pruneCalls() {
	if len(in.calls) <= maxCalls {
		return
	}
	for id, c := range in.calls {
		if c.answered {
			delete(in.calls, id)
			if len(in.calls) <= maxCalls/2 {
				return
			}
		}
	}
}

// read hands out every pending item, marked read in the queue (on disk)
// first: an item handed to the model is never shown again, whatever
// restarts. If the mark cannot be written, nothing is handed out.
func (in *inbox) read() ([]item, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.readLocked()
}

func (in *inbox) readLocked() ([]item, error) {
	out := in.pending
	var queued []string
	for _, it := range out {
		if !in.own[it.ID] {
			queued = append(queued, it.ID)
		}
	}
	if len(queued) > 0 {
		if err := in.q.read(queued...); err != nil {
			return nil, err
		}
		in.freed()
	}
	in.pending = nil
	return out, nil
}

// freed tells an add waiting for room that there may be some.
func (in *inbox) freed() {
	close(in.room)
	in.room = make(chan struct{})
}

// peek lists the pending items without taking them.
func (in *inbox) peek() []item {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]item(nil), in.pending...)
}

// wait is read once there are pending items, or returns nothing when wctx
// ends first. When host (the request's context) has ended meanwhile
// nothing is handed out: nobody would read the answer.
func (in *inbox) wait(host, wctx context.Context) ([]item, error) {
	for {
		in.mu.Lock()
		if host.Err() != nil {
			in.mu.Unlock()
			return nil, host.Err()
		}
		if len(in.pending) > 0 {
			defer in.mu.Unlock()
			return in.readLocked()
		}
		sig := in.signal
		in.mu.Unlock()
		select {
		case <-sig:
		case <-wctx.Done():
			return nil, host.Err()
		}
	}
}

func ids(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func (it item) line() string {
	switch {
	case it.Kind == "message" && it.From != "":
		return fmt.Sprintf("message from agent group %s: %s", it.From, it.Text)
	case it.Kind == "message" && it.User != "":
		return fmt.Sprintf("message from %s: %s", it.User, it.Text)
	case it.Kind == "message":
		return "message: " + it.Text
	case it.Hold != "":
		return fmt.Sprintf("%s (hold %s): %s", it.Kind, it.Hold, it.Text)
	}
	return it.Kind + ": " + it.Text
}
