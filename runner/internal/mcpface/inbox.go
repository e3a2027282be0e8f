package mcpface

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// Acker tells the runner that the agent has inbox items, so the runner
// stops re-sending them. It is called once read_inbox or wait_for_messages
// has handed the items to the model (a notification alone is no proof the
// model saw anything).
//
// Today the gateway's stream send is the take: the runner forgets an item
// once it is on the stream, and NoAck is the implementation. When the
// gateway's ack RPC lands, an Acker calling it is the one change here
// (with itemID reading the item's id from the runner).
type Acker interface {
	Ack(ctx context.Context, ids []string) error
}

// AckFunc is a function as an Acker (the gateway's Ack RPC, for one).
type AckFunc func(ctx context.Context, ids []string) error

// Ack calls f.
func (f AckFunc) Ack(ctx context.Context, ids []string) error { return f(ctx, ids) }

// NoAck acknowledges nothing: the stream's delivery already was the take.
type NoAck struct{}

// Ack does nothing.
func (NoAck) Ack(context.Context, []string) error { return nil }

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

// itemID is the de-duplication key of an inbox item: a message's id, else
// a digest of the notice (the runner gives notices no id yet).
func itemID(r *agentv1.InboxResponse) string {
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

// inbox holds the items the model has not been handed yet, de-duplicated by
// id, and the notices of tool calls still being answered.
type inbox struct {
	mu      sync.Mutex
	pending []item
	// seen: every id taken from the runner (bounded); true once the item
	// is done with (handed to the model, or consumed here), false while it
	// waits. A re-sent done item is acknowledged again, never shown again.
	seen   map[string]bool
	order  []string
	signal chan struct{} // closed and replaced when items arrive
	calls  map[string]*call
	onNew  func(item) // called (outside the lock) for each new item
}

// call is a tool call whose Send is in flight: its notices are held back
// until the call answers (the answer said it all: they are dropped) or
// gives up waiting (the outcome will come as a notice: they are let in).
type call struct {
	held     []item
	answered bool
}

const maxSeen = 10000

func newInbox(onNew func(item)) *inbox {
	return &inbox{seen: map[string]bool{}, signal: make(chan struct{}), calls: map[string]*call{}, onNew: onNew}
}

// add takes one item from the runner. It reports whether the item is done
// with already (a duplicate of one handed out, or the notice of a call the
// model has its answer for): the caller acknowledges those at once.
func (in *inbox) add(id string, r *agentv1.InboxResponse) (done bool) {
	in.mu.Lock()
	if d, ok := in.seen[id]; ok {
		in.mu.Unlock()
		return d
	}
	it := toItem(id, r)
	if c := in.calls[it.Req]; it.Req != "" && c != nil {
		answered := c.answered
		in.remember(id, answered)
		if !answered {
			c.held = append(c.held, it)
		}
		in.mu.Unlock()
		return answered
	}
	in.remember(id, false)
	in.arrive(it)
	in.mu.Unlock()
	in.onNew(it)
	return false
}

// consumed marks an item done without showing it (a notice clawguard-mcp
// acts on itself).
func (in *inbox) consumed(id string) {
	in.mu.Lock()
	in.remember(id, true)
	in.mu.Unlock()
}

func (in *inbox) remember(id string, done bool) {
	if _, ok := in.seen[id]; ok {
		in.seen[id] = done
		return
	}
	in.seen[id] = done
	in.order = append(in.order, id)
	for len(in.order) > maxSeen {
		delete(in.seen, in.order[0])
		in.order = in.order[1:]
	}
}

func (in *inbox) arrive(it item) {
	in.pending = append(in.pending, it)
	close(in.signal)
	in.signal = make(chan struct{})
}

// localPrefix marks the ids of items clawguard-mcp made itself: never
// acknowledged to the runner.
const localPrefix = "local:"

// local adds an item clawguard-mcp itself has to say (a tool it could not
// offer, for one).
func (in *inbox) local(text string) {
	r := &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: &agentv1.Notice{
		Kind: agentv1.NoticeKind_NOTICE_KIND_INFO, Text: text, At: timestamppb.Now()}}}
	in.add(localPrefix+itemID(r), r)
}

// begin marks a tool call's request id in flight.
func (in *inbox) begin(requestID string) {
	in.mu.Lock()
	in.calls[requestID] = &call{}
	in.mu.Unlock()
}

// answered ends a call the model got its answer for: its notices, held
// back or still to come, are dropped (the ids of those held back are
// returned, to acknowledge). The mark is kept for notices that arrive
// after the answer.
func (in *inbox) answered(requestID string) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var dropped []string
	if c := in.calls[requestID]; c != nil {
		for _, it := range c.held {
			in.seen[it.ID] = true
			dropped = append(dropped, it.ID)
		}
		c.answered, c.held = true, nil
	}
	in.pruneCalls()
	return dropped
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

// take hands out every pending item; done marks them handed over (once
// acknowledged), put gives them back.
func (in *inbox) take() []item {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := in.pending
	in.pending = nil
	return out
}

func (in *inbox) done(items []item) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, it := range items {
		if _, ok := in.seen[it.ID]; ok {
			in.seen[it.ID] = true
		}
	}
}

// peek lists the pending items without taking them.
func (in *inbox) peek() []item {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]item(nil), in.pending...)
}

// wait takes the pending items, waiting until there are some or ctx ends.
func (in *inbox) wait(ctx context.Context) []item {
	for {
		in.mu.Lock()
		if len(in.pending) > 0 {
			out := in.pending
			in.pending = nil
			in.mu.Unlock()
			return out
		}
		sig := in.signal
		in.mu.Unlock()
		select {
		case <-sig:
		case <-ctx.Done():
			return nil
		}
	}
}

// put gives items back (their acknowledgement failed), ahead of newer ones.
func (in *inbox) put(items []item) {
	if len(items) == 0 {
		return
	}
	in.mu.Lock()
	in.pending = append(append([]item(nil), items...), in.pending...)
	close(in.signal)
	in.signal = make(chan struct{})
	in.mu.Unlock()
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
