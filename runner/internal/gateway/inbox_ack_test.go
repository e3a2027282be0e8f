package gateway

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

func ids(es []entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.id)
	}
	return out
}

func fill(t *testing.T, in *Inbox, n int) {
	t.Helper()
	for i := range n {
		if err := in.Durable(fmt.Sprintf("push_%d", i), msg(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 29, item 8: ten messages written to a busy agent's stream (its
// process stopped, not exited) were marked taken as soon as they were
// written, so a runner SIGKILLed then restarted gave the agent 0 of 10. An
// item an acknowledging agent was sent but never acknowledged is still in
// the log after a restart, and sent again.
func TestUnacknowledgedItemsSurviveARunnerRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s1.log")
	in, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, in, 10)
	r := read(t, in, true)
	var written []entry
	for range 10 {
		written = append(written, r.next(t, nil)) // in the stopped agent's socket buffer
	}
	if n := in.Ack([]string{written[0].id, written[1].id}); n != 2 {
		t.Fatalf("ack of two held items = %d", n)
	}
	if got := in.Unacked(); got != 8 {
		t.Fatalf("unacknowledged = %d, want 8", got)
	}
	// SIGKILL: no Close, no detach. The log is all that is left.
	again, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	r2 := read(t, again, true)
	var got []string
	for again.Len() > again.Unacked() {
		e := r2.next(t, nil)
		if e.item.GetItemId() != e.id {
			t.Fatalf("item sent with item_id %q, want %q", e.item.GetItemId(), e.id)
		}
		got = append(got, e.item.GetMessage().GetId())
	}
	if want := []string{"m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"}; !slices.Equal(got, want) {
		t.Fatalf("after the restart the agent got %v, want %v", got, want)
	}
}

// An acknowledging agent's next stream (it reconnected, or was restarted)
// gets what earlier streams sent and it never acknowledged, first and in
// order, then what arrived meanwhile; acknowledged items never again.
func TestUnacknowledgedItemsComeFirstOnTheNextStream(t *testing.T) {
	in := NewInbox(0)
	fill(t, in, 4)
	r := read(t, in, true)
	a, b, c := r.next(t, nil), r.next(t, nil), r.next(t, nil)
	in.Ack([]string{b.id})
	if err := in.Durable("push_late", msg("late")); err != nil {
		t.Fatal(err)
	}
	r.detach() // the stream ends with a and c unacknowledged
	r2 := read(t, in, true)
	var got []string
	for range 4 {
		got = append(got, r2.next(t, nil).id)
	}
	if want := []string{a.id, c.id, "push_3", "push_late"}; !slices.Equal(got, want) {
		t.Fatalf("next stream got %v, want %v", got, want)
	}
	// An ack that arrives late from the old connection still counts, and
	// an ack of an id already taken (or unknown) is not an error.
	if n := in.Ack([]string{a.id, c.id, b.id, "never-sent"}); n != 2 {
		t.Fatalf("ack = %d, want 2", n)
	}
	if n := in.Ack([]string{"push_3", "push_late"}); n != 2 || in.Len() != 0 {
		t.Fatalf("ack = %d, %d items still held", n, in.Len())
	}
}

// A stream replaced while it was writing an item (the agent reconnected)
// hands that item to the new stream once the write ends.
func TestAnItemWrittenOnAReplacedStreamIsSentAgain(t *testing.T) {
	in := NewInbox(0)
	fill(t, in, 1)
	r := read(t, in, true)
	e, err := in.next(r.ctx, r.gen) // being written when the agent reconnects
	if err != nil {
		t.Fatal(err)
	}
	r2 := read(t, in, true)
	in.wrote(e, r.gen, nil, true) // the old write completes after all
	if got := r2.next(t, nil); got.id != e.id {
		t.Fatalf("new stream got %s, want %s", got.id, e.id)
	}
}

// Issue 29, item 11: an approval the database forgot, approved again,
// delivered the message a second time under a new push. A delivered
// message is de-duplicated by its sender and message id, across runner
// restarts and after the agent took the first one.
func TestTheSameMessageUnderANewPushIsDeliveredOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s1.log")
	in, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	from := func(group, id string) *agentv1.InboxResponse {
		return &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{Id: id, FromAgentGroupId: group, Text: "hi"}}}
	}
	if err := in.Durable("push_1", from("A", "m_hold_1")); err != nil {
		t.Fatal(err)
	}
	// The same message under another push while the first still waits.
	if err := in.Durable("push_2", from("A", "m_hold_1")); err != nil {
		t.Fatal(err)
	}
	if in.Len() != 1 {
		t.Fatalf("%d items held, want 1", in.Len())
	}
	r := read(t, in, true)
	in.Ack([]string{r.next(t, nil).id})
	// Other messages later, and a restart (which compacts the log).
	for i := range 50 {
		id := fmt.Sprintf("push_other_%d", i)
		if err := in.Durable(id, from("C", id)); err != nil {
			t.Fatal(err)
		}
		in.Ack([]string{r.next(t, nil).id})
	}
	again, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Durable("push_3", from("A", "m_hold_1")); err != nil {
		t.Fatal(err)
	}
	if n := again.Len(); n != 0 {
		t.Fatalf("the message delivered again after a restart (%d held)", n)
	}
	// Another sender's message with the same id is another message: no
	// agent can have someone else's message dropped by naming its id.
	if err := again.Durable("push_4", from("B", "m_hold_1")); err != nil {
		t.Fatal(err)
	}
	if n := again.Len(); n != 1 {
		t.Fatalf("another sender's message with that id: %d held, want 1", n)
	}
}

// A notice the runner may come to give twice about one event (PushOnce)
// reaches the agent once, across a restart.
func TestPushOnceGivesANoticeOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s1.log")
	in, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: &agentv1.Notice{Text: "approved"}}}
	in.PushOnce("approved/hold_1", n)
	in.PushOnce("approved/hold_1", n)
	if in.Len() != 1 {
		t.Fatalf("%d held, want 1", in.Len())
	}
	r := read(t, in, true)
	in.Ack([]string{r.next(t, nil).id})
	again, err := OpenInbox(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	again.PushOnce("approved/hold_1", n)
	if again.Len() != 0 {
		t.Fatal("the notice given again after a restart")
	}
}

// The liveness check's view: items an agent was sent and does not
// acknowledge are stalled from when they were sent; an ack is progress.
func TestStalledCountsWhatTheAgentHoldsUp(t *testing.T) {
	in := NewInbox(0)
	if n, _ := in.Stalled(); n != 0 {
		t.Fatalf("empty inbox stalled on %d", n)
	}
	fill(t, in, 2)
	// Waiting with no reader: the agent is not reading.
	if n, _ := in.Stalled(); n != 2 {
		t.Fatalf("stalled on %d with no reader, want 2", n)
	}
	r := read(t, in, true)
	if n, _ := in.Stalled(); n != 0 {
		t.Fatalf("stalled on %d with a reader and nothing sent", n)
	}
	before := time.Now()
	a := r.next(t, nil)
	r.next(t, nil)
	n, since := in.Stalled()
	if n != 2 || since.Before(before) {
		t.Fatalf("stalled on %d since %v, want 2 since the writes", n, since)
	}
	in.Ack([]string{a.id})
	if n, since2 := in.Stalled(); n != 1 || since2.Before(since) {
		t.Fatalf("after an ack: stalled on %d since %v (was %v)", n, since2, since)
	}
}
