package inbound_test

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Two replicas on one database: the chat message comes in on one, the
// clicks land on the other; approvals and rejections are carried out
// wherever they were resolved or followed.
func TestChannelRegistrationAcrossTwoReplicas(t *testing.T) {
	f := newChannelFixture(t)
	other := testserver.StartOn(t, f.srv.URL)
	bridgeB := testserver.ClientsFor(other.Conn(t, other.BridgeToken(t, "telegram"), ""))

	approved := f.register(groupMention("chat-two-replicas", "@bot hi from A"))
	if _, err := bridgeB.Approvals.Resolve(t.Context(), &guardv1.ResolveRequest{
		Id: approved.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: owner, Choice: "connect:ag-1",
	}); err != nil {
		t.Fatalf("resolve on replica B: %v", err)
	}
	if n := f.wirings(mgOf(approved)); n != 1 {
		t.Errorf("wirings = %d, want 1", n)
	}
	if got := f.delivered("ag-1"); len(got) != 1 || got[0].GetText() != "@bot hi from A" {
		t.Errorf("deliveries = %v, want the original message", got)
	}

	rejected := f.register(groupMention("chat-two-replicas-no", ""))
	if _, err := bridgeB.Approvals.Resolve(t.Context(), &guardv1.ResolveRequest{
		Id: rejected.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: owner, Choice: "reject",
	}); err != nil {
		t.Fatalf("reject on replica B: %v", err)
	}
	f.eventually("the rejected chat to be denied", func() bool {
		return f.count(`SELECT count(*) FROM messaging_groups WHERE id = $1 AND denied_at IS NOT NULL`, mgOf(rejected)) == 1
	})
}

// A rejection that no replica carried out (all were down when it was
// resolved) is carried out by the chat's next message.
func TestRejectedRegistrationIsCarriedOutByTheNextMessage(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-late-reject", ""))
	mg := mgOf(card)
	// Resolve behind the replicas' backs: no event handler runs.
	f.exec(`UPDATE holds SET status = 'rejected', resolved_at = now(), resolver = $2 WHERE id = $1`, card.GetId(), owner)

	resp := f.route(groupMention("chat-late-reject", "@bot again"))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED {
		t.Errorf("next message after a rejection: %v, want DROPPED", resp)
	}
	if n := f.count(`SELECT count(*) FROM messaging_groups WHERE id = $1 AND denied_at IS NOT NULL`, mg); n != 1 {
		t.Error("the chat was not remembered as denied")
	}
	if n := f.requestedInDB(kindChReg); n != 1 {
		t.Errorf("requested events = %d, want 1 (no second card)", n)
	}
}

// An approval whose continuation never ran (its replica stopped between
// the commit and the handler) is carried out by the chat's next message:
// the original message first, then the new one.
func TestApprovedRegistrationMissedByItsReplicaIsCarriedOutByTheNextMessage(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-late-approve", "@bot first"))
	f.exec(`UPDATE holds SET status = 'approved', resolved_at = now(), resolver = $2, choice = 'connect:ag-1' WHERE id = $1`, card.GetId(), owner)

	resp := f.route(groupMention("chat-late-approve", "@bot second"))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED {
		t.Fatalf("next message: %v, want DELIVERED", resp)
	}
	if n := f.wirings(mgOf(card)); n != 1 {
		t.Errorf("wirings = %d, want 1", n)
	}
	got := f.delivered("ag-1")
	if len(got) != 2 || got[0].GetText() != "@bot first" || got[1].GetText() != "@bot second" {
		t.Errorf("deliveries = %v, want the held message then the new one", got)
	}
	if n := f.requestedInDB(kindChReg); n != 1 {
		t.Errorf("requested events = %d, want 1 (no second card)", n)
	}
}
