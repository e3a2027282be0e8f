package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// Over the real socket: an agent that acknowledges gets item ids, acks what
// it handled with Ack, and after it reconnects gets again only what it did
// not acknowledge. An older agent (no acknowledges) gets each item once.
func TestAgentAcknowledgesOverTheGateway(t *testing.T) {
	g, c := start(t, &countingSubmitter{}, Options{})
	for _, id := range []string{"p1", "p2", "p3"} {
		if err := g.inbox.Durable(id, msg("m-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recv := func(st agentv1.AgentGateway_InboxClient, n int) []*agentv1.InboxResponse {
		t.Helper()
		var out []*agentv1.InboxResponse
		for range n {
			it, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, it)
		}
		return out
	}
	s1ctx, s1cancel := context.WithCancel(ctx)
	s1, err := c.Inbox(s1ctx, &agentv1.InboxRequest{Acknowledges: true})
	if err != nil {
		t.Fatal(err)
	}
	first := recv(s1, 3)
	if first[0].GetItemId() != "p1" || first[2].GetItemId() != "p3" {
		t.Fatalf("item ids %q..%q, want p1..p3", first[0].GetItemId(), first[2].GetItemId())
	}
	resp, err := c.Ack(ctx, &agentv1.AckRequest{ItemIds: []string{"p2", "unknown"}})
	if err != nil || resp.GetAcknowledged() != 1 {
		t.Fatalf("ack = %v, %v; want 1 acknowledged", resp, err)
	}
	s1cancel() // the agent dies with p1 and p3 handled or not: it never said
	waitDetached(t, g)

	s2, err := dial(t, g.Path()).Inbox(ctx, &agentv1.InboxRequest{Acknowledges: true})
	if err != nil {
		t.Fatal(err)
	}
	var again []string
	for _, it := range recv(s2, 2) {
		again = append(again, it.GetItemId())
	}
	if !slices.Equal(again, []string{"p1", "p3"}) {
		t.Fatalf("after the reconnect: %v, want [p1 p3]", again)
	}
	if _, err := c.Ack(ctx, &agentv1.AckRequest{ItemIds: make([]string, maxAckIDs+1)}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("oversized ack: %v, want InvalidArgument", err)
	}
	if resp, err := c.Ack(ctx, &agentv1.AckRequest{ItemIds: again}); err != nil || resp.GetAcknowledged() != 2 || g.inbox.Len() != 0 {
		t.Fatalf("final ack = %v, %v; %d items still held", resp, err, g.inbox.Len())
	}
}

// An agent written before Ack existed keeps today's semantics: an item is
// taken once written, never sent twice.
func TestAnAgentThatDoesNotAcknowledgeGetsEachItemOnce(t *testing.T) {
	g, c := start(t, &countingSubmitter{}, Options{})
	if err := g.inbox.Durable("p1", msg("m1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s1ctx, s1cancel := context.WithCancel(ctx)
	s1, err := c.Inbox(s1ctx, &agentv1.InboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if it, err := s1.Recv(); err != nil || it.GetMessage().GetId() != "m1" {
		t.Fatalf("first item: %v %v", it, err)
	}
	s1cancel()
	waitDetached(t, g)
	if n := g.inbox.Len(); n != 0 {
		t.Fatalf("%d items held after an agent that does not ack read them", n)
	}
}

func waitDetached(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for g.inbox.Attached() {
		if time.Now().After(deadline) {
			t.Fatal("inbox stream never detached")
		}
		<-time.After(10 * time.Millisecond)
	}
}
