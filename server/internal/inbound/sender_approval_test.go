package inbound_test

// Ports of the seed's src/modules/permissions/sender-approval.test.ts, case
// by case, plus the other two sender policies (public, strict).

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/permissions"
)

const (
	strangerID = "telegram:stranger"
	kindAdmit  = permissions.SenderAdmitApprovalAction
)

// newSenderFixture is the seed's beforeEach: agent group ag-1, a group chat
// (mg-chat, telegram chat-123) with the given sender policy wired to it, and
// an owner whose DM is dm-owner.
func newSenderFixture(t *testing.T, policy string) *fixture {
	f := newFixture(t)
	f.group("ag-1", "Agent")
	f.exec(`INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group, unknown_sender_policy)
		VALUES ('mg-chat', 'telegram', 'chat-123', 'Group Chat', true, $1)`, policy)
	f.exec(`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('mga-1', 'mg-chat', 'ag-1')`)
	f.user(owner, "owner", "")
	f.dm(owner, "telegram", "dm-owner")
	return f
}

func stranger(text string) *guardv1.RouteInboundRequest {
	return &guardv1.RouteInboundRequest{
		ChannelType: "telegram", PlatformId: "chat-123", IsGroup: true,
		SenderUserId: strangerID, SenderName: "Stranger", MessageId: msgID(), Text: text,
	}
}

// ask routes a stranger's message and returns the admission card.
func (f *fixture) ask(text string) *guardv1.Hold {
	f.t.Helper()
	resp := f.route(stranger(text))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_HELD || resp.GetHoldId() == "" {
		f.t.Fatalf("stranger's message: %v, want HELD with a hold", resp)
	}
	return f.awaitEvent(guardv1.EventType_EVENT_TYPE_REQUESTED, resp.GetHoldId()).GetHold()
}

func (f *fixture) pendingAdmits() int {
	return f.count(`SELECT count(*) FROM holds WHERE kind = $1 AND status = 'pending'`, kindAdmit)
}

func (f *fixture) isMember(user, group string) bool {
	return f.count(`SELECT count(*) FROM agent_group_members WHERE user_id = $1 AND agent_group_id = $2`, user, group) == 1
}

func TestSenderApproval_DeliversAnApprovalCardOnFirstUnknownMessage(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("hi")

	if card.GetKind() != kindAdmit {
		t.Errorf("kind = %q, want %q", card.GetKind(), kindAdmit)
	}
	if card.GetDeliveredTo() != owner {
		t.Errorf("delivered_to = %q, want %q (DM dm-owner)", card.GetDeliveredTo(), owner)
	}
	if card.GetTitle() != "👤 New sender" {
		t.Errorf("title = %q", card.GetTitle())
	}
	if got := optionValues(card); len(got) != 2 || got[0] != "approve" || got[1] != "reject" {
		t.Errorf("options = %v, want [approve reject]", got)
	}
	// Hold-record contract: sessionless, anchored to the wired group,
	// admins-of-scope with the delivered approver recorded, dedup key.
	if card.GetSessionId() != "" {
		t.Errorf("session = %q, want sessionless", card.GetSessionId())
	}
	if card.GetAgentGroupId() != "ag-1" {
		t.Errorf("anchor = %q, want ag-1", card.GetAgentGroupId())
	}
	if r := card.GetApproverRule().GetAdminsOfScope(); r == nil || r.GetAgentGroupId() != "ag-1" || r.GetDeliveredTo() != owner {
		t.Errorf("approver rule = %v, want admins-of-scope{ag-1, delivered_to %s}", card.GetApproverRule(), owner)
	}
	if card.GetDedupKey() != "sender_admit/ag-1//sender_admit:mg-chat:telegram:stranger" {
		t.Errorf("dedup key = %q", card.GetDedupKey())
	}
	if n := f.count(`SELECT count(*) FROM holds WHERE kind = $1`, kindAdmit); n != 1 {
		t.Errorf("sender_admit holds = %d, want 1", n)
	}
	// The message itself is dropped (recorded) until the sender is admitted.
	if n := f.count(`SELECT count(*) FROM dropped_messages WHERE messaging_group_id = 'mg-chat' AND sender_user_id = $1`, strangerID); n != 1 {
		t.Errorf("dropped_messages = %d, want 1", n)
	}
	if got := f.delivered("ag-1"); len(got) != 0 {
		t.Errorf("deliveries = %v, want none before admission", got)
	}
}

func TestSenderApproval_DedupsASecondMessageFromTheSameStrangerWhilePending(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("hello")
	again := f.route(stranger("are you there?"))

	if again.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_HELD || again.GetHoldId() != card.GetId() {
		t.Errorf("second message: %v, want HELD on the same hold %s", again, card.GetId())
	}
	if n := f.requestedInDB(kindAdmit); n != 1 {
		t.Errorf("requested events = %d, want 1 (no second card)", n)
	}
	if n := f.count(`SELECT count(*) FROM holds WHERE kind = $1`, kindAdmit); n != 1 {
		t.Errorf("sender_admit holds = %d, want 1", n)
	}
}

func TestSenderApproval_ApproveAddsMemberAndReplaysTheOriginalMessage(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("please let me in")

	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "approve")
	if ev := f.awaitEvent(guardv1.EventType_EVENT_TYPE_RESOLVED, card.GetId()); ev.GetOutcome() != guardv1.Outcome_OUTCOME_APPROVE {
		t.Errorf("resolved outcome = %s, want APPROVE", ev.GetOutcome())
	}

	if !f.isMember(strangerID, "ag-1") {
		t.Error("the stranger is not a member of ag-1")
	}
	if n := f.pendingAdmits(); n != 0 {
		t.Errorf("pending sender_admit holds = %d, want 0", n)
	}
	// The original message was replayed to the group's session (the seed's wakeContainer).
	got := f.delivered("ag-1")
	if len(got) != 1 || got[0].GetText() != "please let me in" || got[0].GetSenderUserId() != strangerID {
		t.Fatalf("deliveries = %v, want the original message once", got)
	}
	// Admitted: the next message goes straight through.
	if r := f.route(stranger("thanks")); r.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED {
		t.Errorf("next message: %v, want DELIVERED", r)
	}
}

func TestSenderApproval_DenyDeletesThePendingHoldWithoutAddingAMember(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("hello")

	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_REJECT, "reject")
	if ev := f.awaitEvent(guardv1.EventType_EVENT_TYPE_RESOLVED, card.GetId()); ev.GetOutcome() != guardv1.Outcome_OUTCOME_REJECT {
		t.Errorf("resolved outcome = %s, want REJECT", ev.GetOutcome())
	}
	if n := f.pendingAdmits(); n != 0 {
		t.Errorf("pending sender_admit holds = %d, want 0", n)
	}
	if f.isMember(strangerID, "ag-1") {
		t.Error("a rejected stranger became a member")
	}
	if got := f.delivered("ag-1"); len(got) != 0 {
		t.Errorf("deliveries = %v, want none", got)
	}
	// No deny list: the dedup key is free again, a later message asks again.
	again := f.ask("pretty please")
	if again.GetId() == card.GetId() {
		t.Error("a later message reused the rejected hold")
	}
}

func TestSenderApproval_RejectsClicksFromAnUnauthorizedUserPreventsSelfAdmitViaForwardedCard(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("can I play")
	f.user("telegram:random-bystander", "", "")

	f.wantDenied(card.GetId(), "telegram:random-bystander", guardv1.Outcome_OUTCOME_APPROVE, "approve")
	// The stranger cannot admit themselves either.
	f.wantDenied(card.GetId(), strangerID, guardv1.Outcome_OUTCOME_APPROVE, "approve")

	if f.isMember(strangerID, "ag-1") {
		t.Error("the stranger was admitted by an unauthorized click")
	}
	if n := f.pendingAdmits(); n != 1 {
		t.Errorf("pending sender_admit holds = %d, want 1 (a real approver can still act)", n)
	}
}

func TestSenderApproval_AcceptsAClickFromAGlobalAdminEvenIfNotTheDeliveredApprover(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	f.user("telegram:admin-bob", "admin", "") // global admin, no DM: the card goes to the owner
	card := f.ask("knock knock")
	if card.GetDeliveredTo() != owner {
		t.Fatalf("delivered_to = %q, want %q", card.GetDeliveredTo(), owner)
	}

	f.mustClick(card.GetId(), "telegram:admin-bob", guardv1.Outcome_OUTCOME_APPROVE, "approve")
	if !f.isMember(strangerID, "ag-1") {
		t.Error("the stranger was not admitted on the global admin's click")
	}
	if got := f.delivered("ag-1"); len(got) != 1 || got[0].GetText() != "knock knock" {
		t.Errorf("deliveries = %v, want the replayed message", got)
	}
}

// Policy strict (and the guard's senders.admit deny): dropped and recorded,
// no card.
func TestSenderApproval_StrictPolicyDropsAndRecordsWithoutACard(t *testing.T) {
	f := newSenderFixture(t, "strict")
	resp := f.route(stranger("hi"))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED || resp.GetHoldId() != "" {
		t.Fatalf("strict chat: %v, want DROPPED without a hold", resp)
	}
	if n := f.count(`SELECT count(*) FROM holds WHERE kind = $1`, kindAdmit); n != 0 {
		t.Errorf("sender_admit holds = %d, want 0", n)
	}
	if n := f.count(`SELECT count(*) FROM dropped_messages WHERE messaging_group_id = 'mg-chat' AND sender_user_id = $1`, strangerID); n != 1 {
		t.Errorf("dropped_messages = %d, want 1", n)
	}
	if n := f.count(`SELECT count(*) FROM decisions WHERE action = 'senders.admit' AND effect = 'deny'`); n != 1 {
		t.Errorf("senders.admit deny decisions logged = %d, want 1 (the guard decides)", n)
	}
}

// Policy public: the guard allows; delivered to the group's session on the
// live runner. A retried message (same id) is one delivery.
func TestSenderApproval_PublicPolicyDeliversToTheWiredGroupsSession(t *testing.T) {
	f := newSenderFixture(t, "public")
	msg := stranger("hello all")
	first := f.route(msg)
	if first.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED || first.GetSessionId() == "" {
		t.Fatalf("public chat: %v, want DELIVERED", first)
	}
	retry := f.route(msg)
	if retry.GetSessionId() != first.GetSessionId() {
		t.Errorf("retry went to session %q, want %q", retry.GetSessionId(), first.GetSessionId())
	}
	if got := f.delivered("ag-1"); len(got) != 1 || got[0].GetText() != "hello all" {
		t.Errorf("deliveries = %v, want one", got)
	}
	if got := f.str(`SELECT runner_id FROM sessions WHERE id = $1`, first.GetSessionId()); got != runnerID {
		t.Errorf("session runner = %q, want %q", got, runnerID)
	}
	// A known sender (the owner) needs no admission whatever the policy.
	f.exec(`UPDATE messaging_groups SET unknown_sender_policy = 'strict' WHERE id = 'mg-chat'`)
	own := stranger("owner here")
	own.SenderUserId = owner
	if r := f.route(own); r.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED {
		t.Errorf("owner in a strict chat: %v, want DELIVERED", r)
	}
}

// The admission is replayed through the guard with the hold as its grant:
// a chat turned strict between the card and the click admits nobody (the
// baseline is re-checked live, as D3 does for a2a), and the grant is used
// once.
func TestSenderApproval_ApproveAfterTheChatTurnedStrictAdmitsNobody(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("let me in")
	f.exec(`UPDATE messaging_groups SET unknown_sender_policy = 'strict' WHERE id = 'mg-chat'`)

	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "approve")
	if f.isMember(strangerID, "ag-1") {
		t.Error("admitted into a chat that turned strict")
	}
	if got := f.delivered("ag-1"); len(got) != 0 {
		t.Errorf("deliveries = %v, want none", got)
	}
	if n := f.count(`SELECT count(*) FROM decisions WHERE action = 'senders.admit' AND grant_id = $1 AND effect = 'deny'`, card.GetId()); n != 1 {
		t.Errorf("denied replays with the grant = %d, want 1", n)
	}
}

func TestSenderApproval_ApprovedAdmissionIsConsumedOnce(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("once")
	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "approve")
	if n := f.count(`SELECT count(*) FROM holds WHERE id = $1 AND consumed_at IS NOT NULL`, card.GetId()); n != 1 {
		t.Errorf("the approved hold was not consumed by the admission")
	}
	if n := f.count(`SELECT count(*) FROM decisions WHERE action = 'senders.admit' AND grant_id = $1 AND effect = 'allow'`, card.GetId()); n != 1 {
		t.Errorf("allowed replays with the grant = %d, want 1", n)
	}
}

// An approval whose continuation never ran (the replica stopped between the
// commit and the handler) is carried out by the sender's next message: the
// original message first, then the new one.
func TestSenderApproval_ApprovalMissedByItsReplicaIsCarriedOutByTheNextMessage(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("first words")
	// Approve behind the replicas' backs: no OnApproved handler runs.
	f.exec(`UPDATE holds SET status = 'approved', resolved_at = now(), resolver = $2 WHERE id = $1`, card.GetId(), owner)

	resp := f.route(stranger("second words"))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED {
		t.Fatalf("next message: %v, want DELIVERED", resp)
	}
	if !f.isMember(strangerID, "ag-1") {
		t.Error("the approved stranger is not a member")
	}
	got := f.delivered("ag-1")
	if len(got) != 2 || got[0].GetText() != "first words" || got[1].GetText() != "second words" {
		t.Errorf("deliveries = %v, want the held message then the new one", got)
	}
	if n := f.requestedInDB(kindAdmit); n != 1 {
		t.Errorf("requested events = %d, want 1 (no second card)", n)
	}
}
