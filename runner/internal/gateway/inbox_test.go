package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

func msg(id string) *agentv1.InboxResponse {
	return &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{Id: id, Text: "text " + id}}}
}

// reader is one Inbox stream, read the way the gateway's Inbox handler
// does (attach, next, wrote), by an agent that acknowledges or not.
type reader struct {
	in     *Inbox
	ctx    context.Context
	gen    uint64
	detach func()
	acks   bool
}

func read(t *testing.T, in *Inbox, acks bool) *reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	ctx, gen, detach := in.attach(ctx)
	r := &reader{in: in, ctx: ctx, gen: gen, detach: detach, acks: acks}
	t.Cleanup(detach)
	return r
}

// next is the next item written to the agent (err: the write failed).
func (r *reader) next(t *testing.T, err error) entry {
	t.Helper()
	e, nerr := r.in.next(r.ctx, r.gen)
	if nerr != nil {
		t.Fatalf("no item for the reader: %v", nerr)
	}
	r.in.wrote(e, r.gen, err, r.acks)
	return e
}

// takeAll hands every waiting item to an agent that does not acknowledge.
func takeAll(t *testing.T, in *Inbox) []string {
	t.Helper()
	r := read(t, in, false)
	defer r.detach()
	var got []string
	for in.Len() > 0 {
		got = append(got, r.next(t, nil).item.GetMessage().GetId())
	}
	return got
}

// Issue 13: the inbox was acknowledged on arrival in memory, so a runner
// restart lost every message the agent had not read. A durable item is on
// disk before Durable returns and is delivered after a reopen, once.
func TestDurableInboxSurvivesARestartAndDeliversEachItemOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox", "s1.log")
	in, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := in.Durable(fmt.Sprintf("push_%d", i), msg(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	in.Notice(&agentv1.Notice{Text: "local notice"})
	// The agent takes two, a third is handed out but its send fails (put back).
	r := read(t, in, false)
	r.next(t, nil)
	r.next(t, nil)
	r.next(t, errors.New("broken stream"))
	// The runner dies here (no Close): the file is all that is left.
	again, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The server re-sends a push that was applied: not added twice, whether
	// taken (push_0) or waiting (push_5).
	for _, id := range []string{"push_0", "push_5"} {
		if err := again.Durable(id, msg("dup")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	r2 := read(t, again, false)
	for again.Len() > 0 {
		if m := r2.next(t, nil).item.GetMessage(); m != nil {
			got = append(got, m.GetId())
		}
	}
	want := []string{"m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart the agent got %v, want %v", got, want)
	}
	third, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := third.Len(); n != 0 {
		t.Fatalf("%d items delivered again after a second restart", n)
	}
}

// A durable item is never dropped: a full inbox refuses it, so the push
// stays unacknowledged; local notices still drop the oldest.
func TestFullInboxRefusesDurableItemsInsteadOfDroppingThem(t *testing.T) {
	in, err := OpenInbox(filepath.Join(t.TempDir(), "s1.log"), 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := in.Durable(fmt.Sprint("p", i), msg(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Durable("p3", msg("m3")); !errors.Is(err, ErrInboxFull) {
		t.Fatalf("durable item into a full inbox: %v, want ErrInboxFull", err)
	}
	if got := takeAll(t, in); fmt.Sprint(got) != "[m0 m1 m2]" {
		t.Fatalf("got %v", got)
	}
	if err := in.Durable("p3", msg("m3")); err != nil {
		t.Fatalf("after the agent read, the re-sent item: %v", err)
	}
}
