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

// takeAll hands every waiting item to "the agent" the way the gateway's
// Inbox stream does (next, then took once sent).
func takeAll(t *testing.T, in *Inbox) []string {
	t.Helper()
	var got []string
	for in.Len() > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		e, err := in.next(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		in.took(e)
		got = append(got, e.item.GetMessage().GetId())
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
	ctx := context.Background()
	for range 2 {
		e, _ := in.next(ctx)
		in.took(e)
	}
	e, _ := in.next(ctx)
	in.unread(e)
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
	for again.Len() > 0 {
		e, err := again.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again.took(e)
		if m := e.item.GetMessage(); m != nil {
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
