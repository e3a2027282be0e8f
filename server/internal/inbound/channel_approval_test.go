package inbound_test

// Ports of the seed's src/modules/permissions/channel-approval.test.ts, case
// by case: the bridge calls RouteInbound, cards are observed on
// Approvals.Watch, clicks are Approvals.Resolve as the bridge with as_user.

import (
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
)

const (
	owner     = "telegram:owner"
	kindChReg = approvals.KindChannelRegistration
)

// newChannelFixture is the seed's beforeEach: one agent group (Andy) and an
// owner whose DM on telegram is dm-owner.
func newChannelFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.group("ag-1", "Andy")
	f.user(owner, "owner", "")
	f.dm(owner, "telegram", "dm-owner")
	return f
}

func groupMention(platformID, text string) *guardv1.RouteInboundRequest {
	if text == "" {
		text = "@bot hello"
	}
	return &guardv1.RouteInboundRequest{
		ChannelType: "telegram", PlatformId: platformID, ChatName: "Chat " + platformID, IsGroup: true,
		SenderUserId: "telegram:caller", SenderName: "Caller", MessageId: msgID(), Text: text,
	}
}

func dmEvent(platformID, text string) *guardv1.RouteInboundRequest {
	if text == "" {
		text = "hello"
	}
	return &guardv1.RouteInboundRequest{
		ChannelType: "telegram", PlatformId: platformID, IsGroup: false,
		SenderUserId: "telegram:stranger", SenderName: "Stranger", MessageId: msgID(), Text: text,
	}
}

func nameReply(sender, dm, text string) *guardv1.RouteInboundRequest {
	return &guardv1.RouteInboundRequest{
		ChannelType: "telegram", PlatformId: dm, SenderUserId: sender, SenderName: "Owner", MessageId: msgID(), Text: text,
	}
}

// register routes msg into an unknown chat and returns the registration card.
func (f *fixture) register(msg *guardv1.RouteInboundRequest) *guardv1.Hold {
	f.t.Helper()
	resp := f.route(msg)
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_REGISTRATION_PENDING || resp.GetHoldId() == "" {
		f.t.Fatalf("RouteInbound into an unknown chat: %v, want REGISTRATION_PENDING with a hold", resp)
	}
	return f.awaitEvent(guardv1.EventType_EVENT_TYPE_REQUESTED, resp.GetHoldId()).GetHold()
}

func (f *fixture) pendingRegistrations() int {
	return f.count(`SELECT count(*) FROM pending_channel_registrations`)
}

func (f *fixture) wirings(mgID string) int {
	return f.count(`SELECT count(*) FROM messaging_group_agents WHERE messaging_group_id = $1`, mgID)
}

func mgOf(h *guardv1.Hold) string {
	return h.GetPayload().GetFields()["messaging_group_id"].GetStringValue()
}

func TestChannelApproval_DeliversAnApprovalCardOnMentionIntoAnUnwiredGroup(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-new", ""))

	if card.GetKind() != kindChReg {
		t.Errorf("kind = %q, want %q", card.GetKind(), kindChReg)
	}
	// Delivered to the owner (whose DM is dm-owner).
	if card.GetDeliveredTo() != owner {
		t.Errorf("delivered_to = %q, want %q", card.GetDeliveredTo(), owner)
	}
	if got := f.str(`SELECT address FROM user_dms WHERE user_id = $1 AND channel_type = 'telegram'`, card.GetDeliveredTo()); got != "dm-owner" {
		t.Errorf("card delivered to DM %q, want dm-owner", got)
	}
	// The card offers a direct "Connect to Andy", a new agent, and reject.
	if label := optionLabel(card, "connect:ag-1"); !strings.Contains(label, "Andy") {
		t.Errorf("connect option label = %q, want it to name Andy (options %v)", label, optionValues(card))
	}
	for _, v := range []string{"new", "reject"} {
		if !contains(optionValues(card), v) {
			t.Errorf("options %v lack %q", optionValues(card), v)
		}
	}
	// D4: the global chain, anchor-less, delivered-to recorded.
	if r := card.GetApproverRule().GetAdminsOfScope(); r == nil || r.GetAgentGroupId() != "" {
		t.Errorf("approver rule = %v, want anchor-less admins-of-scope", card.GetApproverRule())
	}
	if n := f.pendingRegistrations(); n != 1 {
		t.Errorf("pending registrations = %d, want 1", n)
	}
}

func TestChannelApproval_DeliversACardOnDMTooNonThreadedEvent(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(dmEvent("dm-new-user", ""))
	if card.GetDeliveredTo() != owner {
		t.Errorf("delivered_to = %q, want %q", card.GetDeliveredTo(), owner)
	}
	if !strings.Contains(card.GetQuestion(), "direct message") {
		t.Errorf("question %q does not say it is a direct message", card.GetQuestion())
	}
	if n := f.pendingRegistrations(); n != 1 {
		t.Errorf("pending registrations = %d, want 1", n)
	}
}

func TestChannelApproval_AnnouncesTheHoldThroughTheSharedApprovalRequestedObserver(t *testing.T) {
	f := newChannelFixture(t)
	resp := f.route(groupMention("chat-observed", ""))
	f.awaitEvent(guardv1.EventType_EVENT_TYPE_REQUESTED, resp.GetHoldId())

	events := f.watched(guardv1.EventType_EVENT_TYPE_REQUESTED, kindChReg)
	if len(events) != 1 {
		t.Fatalf("requested channel_registration events = %d, want 1", len(events))
	}
	ev := events[0]
	if ev.GetHold().GetDeliveredTo() != owner {
		t.Errorf("delivered_to = %q, want %q", ev.GetHold().GetDeliveredTo(), owner)
	}
	if ev.GetUndelivered() {
		t.Error("event says undelivered; the owner has a DM")
	}
	// The hold is keyed to the messaging group: the pending row names it.
	if got := f.str(`SELECT hold_id FROM pending_channel_registrations WHERE messaging_group_id = $1`, resp.GetMessagingGroupId()); got != ev.GetHold().GetId() {
		t.Errorf("pending registration hold = %q, want %q", got, ev.GetHold().GetId())
	}
	if mgOf(ev.GetHold()) != resp.GetMessagingGroupId() {
		t.Errorf("hold payload messaging group = %q, want %q", mgOf(ev.GetHold()), resp.GetMessagingGroupId())
	}
}

func TestChannelApproval_DedupsASecondMentionWhileTheCardIsPending(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-busy", ""))
	again := f.route(groupMention("chat-busy", "@bot still here"))

	if again.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_REGISTRATION_PENDING || again.GetHoldId() != card.GetId() {
		t.Errorf("second mention: %v, want REGISTRATION_PENDING on hold %s", again, card.GetId())
	}
	if n := f.requestedInDB(kindChReg); n != 1 {
		t.Errorf("requested events = %d, want 1 (no second card)", n)
	}
	if n := f.pendingRegistrations(); n != 1 {
		t.Errorf("pending registrations = %d, want 1", n)
	}
}

func TestChannelApproval_ApproveCreatesWiringAdmitsTriggeringSenderReplays(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-approve", "@bot hello there"))
	mg := mgOf(card)

	// The owner clicks "Connect to Andy".
	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "connect:ag-1")
	resolved := f.awaitEvent(guardv1.EventType_EVENT_TYPE_RESOLVED, card.GetId())
	if resolved.GetOutcome() != guardv1.Outcome_OUTCOME_APPROVE || resolved.GetResolver() != owner {
		t.Errorf("resolved event: outcome %s resolver %q, want APPROVE by %s", resolved.GetOutcome(), resolved.GetResolver(), owner)
	}

	if got := f.str(`SELECT agent_group_id FROM messaging_group_agents WHERE messaging_group_id = $1`, mg); got != "ag-1" {
		t.Errorf("wired to %q, want ag-1", got)
	}
	// The triggering sender is admitted so the replay is not bounced into
	// sender admission.
	if n := f.count(`SELECT count(*) FROM agent_group_members WHERE user_id = 'telegram:caller' AND agent_group_id = 'ag-1'`); n != 1 {
		t.Errorf("triggering sender membership rows = %d, want 1", n)
	}
	if n := f.pendingRegistrations(); n != 0 {
		t.Errorf("pending registrations = %d, want 0", n)
	}
	// The original message was replayed to Andy's session (the seed's wakeContainer).
	got := f.delivered("ag-1")
	if len(got) != 1 || got[0].GetText() != "@bot hello there" || got[0].GetSenderUserId() != "telegram:caller" {
		t.Fatalf("deliveries to ag-1 = %v, want the original message once", got)
	}
}

// The seed asserts engage_mode 'pattern' / engage_pattern '.' for a DM
// wiring. This design has no engage modes: a wired chat delivers every
// message of an admitted sender, which is what pattern '.' means. The port
// checks the DM is wired and that every later message engages.
func TestChannelApproval_ApproveOnADMWiresWithPatternDotDefaults(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(dmEvent("dm-approve-user", "first"))
	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "connect:ag-1")

	if n := f.wirings(mgOf(card)); n != 1 {
		t.Fatalf("wirings = %d, want 1", n)
	}
	next := f.route(dmEvent("dm-approve-user", "no mention needed"))
	if next.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED || next.GetSessionId() == "" {
		t.Fatalf("later DM: %v, want DELIVERED to a session", next)
	}
	got := f.delivered("ag-1")
	if len(got) != 2 || got[0].GetText() != "first" || got[1].GetText() != "no mention needed" {
		t.Errorf("deliveries = %v, want the replayed first message then the second", got)
	}
}

func TestChannelApproval_DenySetsDeniedAtFutureMentionsDropSilentlyWithoutASecondCard(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-deny", ""))
	mg := mgOf(card)

	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_REJECT, "reject")
	resolved := f.awaitEvent(guardv1.EventType_EVENT_TYPE_RESOLVED, card.GetId())
	if resolved.GetOutcome() != guardv1.Outcome_OUTCOME_REJECT {
		t.Errorf("resolved outcome = %s, want REJECT", resolved.GetOutcome())
	}
	// The rejection is carried out from the event stream.
	f.eventually("denied_at to be set", func() bool {
		return f.count(`SELECT count(*) FROM messaging_groups WHERE id = $1 AND denied_at IS NOT NULL`, mg) == 1
	})
	if n := f.wirings(mg); n != 0 {
		t.Errorf("wirings = %d, want 0", n)
	}
	if n := f.pendingRegistrations(); n != 0 {
		t.Errorf("pending registrations = %d, want 0", n)
	}

	// A follow-up mention on the denied chat: dropped and recorded, no new card.
	again := f.route(groupMention("chat-deny", "@bot please"))
	if again.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED {
		t.Errorf("mention on a denied chat: %v, want DROPPED", again)
	}
	if n := f.requestedInDB(kindChReg); n != 1 {
		t.Errorf("requested events = %d, want 1 (no second card)", n)
	}
	if n := f.pendingRegistrations(); n != 0 {
		t.Errorf("pending registrations = %d, want 0", n)
	}
	if n := f.count(`SELECT count(*) FROM dropped_messages WHERE messaging_group_id = $1 AND reason = 'channel denied'`, mg); n != 1 {
		t.Errorf("dropped_messages for the denied chat = %d, want 1", n)
	}
}

func TestChannelApproval_RejectsClicksFromAnUnauthorizedUserPreventsSelfAdmitViaForwardedCard(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-unauth", ""))
	f.user("telegram:random-bystander", "", "")

	f.wantDenied(card.GetId(), "telegram:random-bystander", guardv1.Outcome_OUTCOME_APPROVE, "connect:ag-1")

	if n := f.wirings(mgOf(card)); n != 0 {
		t.Errorf("wirings = %d, want 0", n)
	}
	// The pending registration stays for a real approver, and still works.
	if n := f.pendingRegistrations(); n != 1 {
		t.Errorf("pending registrations = %d, want 1", n)
	}
	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "connect:ag-1")
	if n := f.wirings(mgOf(card)); n != 1 {
		t.Errorf("wirings after the owner's click = %d, want 1", n)
	}
}

func TestChannelApproval_DoesNotLetAScopedAdminDriveChannelRegistrationAtAll(t *testing.T) {
	f := newChannelFixture(t)
	f.group("ag-2", "Betty")
	f.user("telegram:scoped-admin", "admin", "ag-1")
	f.dm("telegram:scoped-admin", "telegram", "dm-scoped-admin")

	card := f.register(groupMention("chat-scoped-cross-group", ""))
	// Registration creates groups and wirings: the card goes to the global
	// chain (the owner's DM), never to the scoped admin, though one exists.
	if card.GetDeliveredTo() != owner {
		t.Fatalf("delivered_to = %q, want %q", card.GetDeliveredTo(), owner)
	}
	// Every click of the scoped admin is refused: no wiring, no new agent,
	// the registration stays for a real approver.
	for _, choice := range []string{"connect:ag-2", "connect:ag-1", "new", "reject"} {
		f.wantDenied(card.GetId(), "telegram:scoped-admin", guardv1.Outcome_OUTCOME_APPROVE, choice)
	}
	f.wantDenied(card.GetId(), "telegram:scoped-admin", guardv1.Outcome_OUTCOME_REJECT, "")

	if n := f.wirings(mgOf(card)); n != 0 {
		t.Errorf("wirings = %d, want 0", n)
	}
	if n := f.pendingRegistrations(); n != 1 {
		t.Errorf("pending registrations = %d, want 1", n)
	}
	if n := f.count(`SELECT count(*) FROM holds WHERE id = $1 AND status = 'pending'`, card.GetId()); n != 1 {
		t.Errorf("hold no longer pending after refused clicks")
	}
	if n := f.count(`SELECT count(*) FROM agent_groups`); n != 2 {
		t.Errorf("agent groups = %d, want 2", n)
	}
}

func TestChannelApproval_CreateNewAgentTheFreeTextNameReplyCreatesTheGroupAndWiresTheChannel(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-create-new", "@bot set me up"))
	mg := mgOf(card)

	// The owner clicks "New agent"; the name is awaited from them.
	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "new")
	if got := f.str(`SELECT awaiting_name_from FROM pending_channel_registrations WHERE messaging_group_id = $1`, mg); got != owner {
		t.Fatalf("awaiting_name_from = %q, want %q", got, owner)
	}

	// The owner replies with the name in their DM.
	resp := f.route(nameReply(owner, "dm-owner", "Newbie"))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_NAME_CAPTURED || resp.GetMessagingGroupId() != mg {
		t.Fatalf("name reply: %v, want NAME_CAPTURED for %s", resp, mg)
	}
	created := f.str(`SELECT id FROM agent_groups WHERE name = 'Newbie'`)
	if n := f.count(`SELECT count(*) FROM messaging_group_agents WHERE messaging_group_id = $1 AND agent_group_id = $2`, mg, created); n != 1 {
		t.Errorf("wirings of the chat to Newbie = %d, want 1", n)
	}
	if n := f.pendingRegistrations(); n != 0 {
		t.Errorf("pending registrations = %d, want 0", n)
	}
	// The name reply itself is not routed anywhere; the original message
	// goes to the new agent.
	got := f.delivered(created)
	if len(got) != 1 || got[0].GetText() != "@bot set me up" {
		t.Errorf("deliveries to Newbie = %v, want the original message", got)
	}
	if n := f.count(`SELECT count(*) FROM messaging_groups WHERE platform_id = 'dm-owner'`); n != 0 {
		t.Errorf("the owner's DM became a messaging group (%d): the name reply was routed", n)
	}
}

func TestChannelApproval_D4InterceptorHalfANameReplyAfterTheRegistrationVanishedIsConsumedWithoutCreatingAnything(t *testing.T) {
	f := newChannelFixture(t)
	card := f.register(groupMention("chat-vanished", ""))
	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "new")

	// The registration disappears between the click and the reply.
	f.exec(`DELETE FROM pending_channel_registrations WHERE messaging_group_id = $1`, mgOf(card))

	before := f.count(`SELECT count(*) FROM agent_groups`)
	resp := f.route(nameReply(owner, "dm-owner", "Ghost"))
	// Consumed: claimed by the armed capture, refused by the guard (nothing
	// pending), not routed on as an ordinary message.
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED {
		t.Errorf("name reply after the registration vanished: %v, want DROPPED", resp)
	}
	if n := f.count(`SELECT count(*) FROM messaging_groups WHERE platform_id = 'dm-owner'`); n != 0 {
		t.Error("the consumed reply was routed on as a message of the owner's DM")
	}
	if n := f.count(`SELECT count(*) FROM inbound_name_captures`); n != 0 {
		t.Errorf("armed captures = %d after the refusal, want 0", n)
	}
	if n := f.count(`SELECT count(*) FROM decisions WHERE action = 'channels.register' AND effect = 'deny'`); n != 1 {
		t.Errorf("channels.register denies logged = %d, want 1 (the guard refused the reply)", n)
	}
	if after := f.count(`SELECT count(*) FROM agent_groups`); after != before {
		t.Errorf("agent groups %d → %d, want unchanged", before, after)
	}
	if n := f.count(`SELECT count(*) FROM agent_groups WHERE name = 'Ghost'`); n != 0 {
		t.Error("an agent group named Ghost was created")
	}
	if n := f.count(`SELECT count(*) FROM messaging_group_agents`); n != 0 {
		t.Errorf("wirings = %d, want 0", n)
	}
}

// Issue 9: a role revoked between the click and the reply denies the reply
// (channels.register, human actor) and disarms the capture.
func TestChannelApproval_RoleRevokedBetweenClickAndNameReplyDeniesAndDisarms(t *testing.T) {
	f := newChannelFixture(t)
	// Bob is a global admin without a DM: the card goes to the owner, and
	// Bob may click it as a global admin.
	f.user("telegram:bob", "admin", "")
	card := f.register(groupMention("chat-revoked", ""))
	mg := mgOf(card)
	f.mustClick(card.GetId(), "telegram:bob", guardv1.Outcome_OUTCOME_APPROVE, "new")

	f.exec(`DELETE FROM user_roles WHERE user_id = 'telegram:bob'`)
	resp := f.route(nameReply("telegram:bob", "dm-bob", "Rogue"))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED {
		t.Errorf("reply after revoke: %v, want DROPPED", resp)
	}
	if n := f.count(`SELECT count(*) FROM agent_groups WHERE name LIKE 'Rogue%'`); n != 0 {
		t.Error("a revoked approver's name reply created an agent group")
	}
	if got := f.str(`SELECT awaiting_name_from FROM pending_channel_registrations WHERE messaging_group_id = $1`, mg); got != "" {
		t.Errorf("awaiting_name_from = %q after a refused reply, want disarmed", got)
	}
	if n := f.count(`SELECT count(*) FROM inbound_name_captures`); n != 0 {
		t.Errorf("armed captures = %d after the refusal, want 0", n)
	}
	// Disarmed: Bob's next DM is not taken as a name either.
	f.route(nameReply("telegram:bob", "dm-bob", "Rogue2"))
	if n := f.count(`SELECT count(*) FROM agent_groups WHERE name LIKE 'Rogue%'`); n != 0 {
		t.Error("the capture was still armed after the refusal")
	}
	if n := f.wirings(mg); n != 0 {
		t.Errorf("wirings = %d, want 0", n)
	}
}

func TestChannelApproval_NoOwnerNoCardNoPendingRowFreshInstallBootstrapPath(t *testing.T) {
	f := newChannelFixture(t)
	f.exec(`DELETE FROM user_roles`)

	resp := f.route(groupMention("chat-noowner", ""))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED || resp.GetHoldId() != "" {
		t.Errorf("mention with no owner: %v, want DROPPED without a hold", resp)
	}
	if n := f.requestedInDB(kindChReg); n != 0 {
		t.Errorf("requested events = %d, want 0", n)
	}
	if n := f.pendingRegistrations(); n != 0 {
		t.Errorf("pending registrations = %d, want 0", n)
	}
	if n := f.count(`SELECT count(*) FROM dropped_messages WHERE messaging_group_id = $1`, resp.GetMessagingGroupId()); n != 1 {
		t.Errorf("dropped_messages = %d, want 1", n)
	}
}

func TestChannelApproval_NoAgentGroupsNoCardNoPendingRow(t *testing.T) {
	f := newChannelFixture(t)
	f.exec(`DELETE FROM user_roles`)
	f.exec(`DELETE FROM agent_groups`)
	f.user(owner, "owner", "") // an owner, but nothing to connect to

	resp := f.route(groupMention("chat-noagent", ""))
	if resp.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED || resp.GetHoldId() != "" {
		t.Errorf("mention with no agent group: %v, want DROPPED without a hold", resp)
	}
	if n := f.count(`SELECT count(*) FROM holds WHERE kind = $1`, kindChReg); n != 0 {
		t.Errorf("registration holds = %d, want 0", n)
	}
	if n := f.pendingRegistrations(); n != 0 {
		t.Errorf("pending registrations = %d, want 0", n)
	}
}
