package telegram

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/cli/internal/bridge/bridgetest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

const (
	danaID     int64 = 42 // admin / approver; her private chat is 42
	ownerID    int64 = 1
	strangerID int64 = 77
	groupChat  int64 = -1001
)

// An unknown sender in a wired group chat is held; Dana (admin of the
// wired group) gets the card in her DM, taps Allow, and the message reaches
// the agent; the agent's reply comes back to the chat.
func TestUnknownSenderAdmittedByATapReachesTheAgent(t *testing.T) {
	e := newEnv(t)
	e.Exec(`INSERT INTO agent_groups (id, name) VALUES ('ag_research', 'research')`)
	dana := e.user(danaID, "admin", "ag_research")
	e.Exec(`INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group, unknown_sender_policy)
		VALUES ('mg_team', 'telegram', $1, 'team', true, 'request_approval')`, fmt.Sprint(groupChat))
	e.Exec(`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('w1', 'mg_team', 'ag_research')`)
	e.startBridge()

	e.tg.say(strangerID, groupChat, "hello agent, can you help?")
	hold := e.HoldOf("sender_admit")
	e.textTo(groupChat, "waiting for an admin")
	if n := len(e.Pushes("ag_research", "deliver")); n != 0 {
		t.Fatalf("%d messages reached the agent before admission", n)
	}
	card := e.card(danaID, hold)
	e.tg.tap(danaID, card, "Allow")

	e.edited(card, "Approved by "+dana)
	e.Eventually(wait, "the admitted message delivered", func() bool {
		for _, p := range e.Pushes("ag_research", "deliver") {
			if p.GetDeliver().GetText() == "hello agent, can you help?" && p.GetDeliver().GetSenderUserId() == userID(strangerID) {
				return true
			}
		}
		return false
	})

	// The agent answers into its chat: the reply reaches the group chat.
	session := e.Str(`SELECT id FROM sessions WHERE agent_group_id = 'ag_research'`)
	if _, err := guardv1.NewRegistryClient(e.RunnerConn()).PostChatMessage(e.AsAgent(session),
		&guardv1.PostChatMessageRequest{Text: "Sure, what do you need?"}); err != nil {
		t.Fatalf("PostChatMessage: %v", err)
	}
	e.textTo(groupChat, "Sure, what do you need?")
}

// A new group chat asks for registration; the owner gets the card in their
// DM, taps "New agent", types the name, and the chat is wired to the new
// agent, which receives the first message.
func TestNewGroupChatRegisteredThroughTheOwnersDM(t *testing.T) {
	e := newEnv(t)
	e.Exec(`INSERT INTO agent_groups (id, name) VALUES ('ag_research', 'research')`)
	owner := e.user(ownerID, "owner", "")
	e.startBridge()

	const newChat int64 = -2002
	e.tg.say(strangerID, newChat, "hi bot")
	hold := e.HoldOf("channel_registration")
	e.textTo(newChat, "not connected to an agent yet")
	card := e.card(ownerID, hold)
	e.tg.tap(ownerID, card, "New agent")
	e.textTo(ownerID, "name of the new agent")

	e.tg.say(ownerID, ownerID, "helper")
	e.textTo(ownerID, "created agent helper")
	e.edited(card, "Approved by "+owner+" — New agent")
	helper := e.Str(`SELECT id FROM agent_groups WHERE name = 'helper'`)
	wired := e.Str(`SELECT mg.platform_id FROM messaging_group_agents w JOIN messaging_groups mg ON mg.id = w.messaging_group_id
		WHERE w.agent_group_id = $1`, helper)
	if wired != fmt.Sprint(newChat) {
		t.Fatalf("helper is wired to chat %s, want %d", wired, newChat)
	}
	e.Eventually(wait, "the first message delivered to the new agent", func() bool {
		for _, p := range e.Pushes(helper, "deliver") {
			if p.GetDeliver().GetText() == "hi bot" {
				return true
			}
		}
		return false
	})
}

func a2aEnv(t *testing.T) (*env, string) {
	e := newEnv(t)
	return e, e.A2A(strconv.FormatInt(danaID, 10))
}

// An a2a hold's card reaches Dana; her tap approves it and the card says so.
func TestA2AHoldApprovedByDanasTap(t *testing.T) {
	e, dana := a2aEnv(t)
	e.startBridge()
	hold := e.A2AHold("deploy at 5")
	card := e.card(danaID, hold)
	if !strings.Contains(card.Text, "research wants to send ops: deploy at 5") {
		t.Fatalf("card text %q lacks the question", card.Text)
	}
	// Someone else's tap is refused and changes nothing.
	e.user(strangerID, "", "")
	e.tg.tap(strangerID, card, "Approve")
	e.Eventually(wait, "the stranger's tap answered", func() bool {
		e.tg.mu.Lock()
		defer e.tg.mu.Unlock()
		for _, a := range e.tg.answers {
			if strings.Contains(a, "may not decide") {
				return true
			}
		}
		return false
	})
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("after a stranger's tap the hold is %s", st)
	}

	e.tg.tap(danaID, card, "Approve")
	ed := e.edited(card, "✅ Approved by "+dana)
	if len(ed.Buttons) != 0 {
		t.Fatalf("the resolved card still has buttons: %v", ed.Buttons)
	}
	if st := e.HoldStatus(hold); st != "approved" {
		t.Fatalf("hold %s, want approved", st)
	}
	if r := e.Pushes("ag_research", "replay"); len(r) != 1 || r[0].GetReplay().GetHoldId() != hold {
		t.Fatalf("replay pushes %v, want one for %s", r, hold)
	}
}

// "Reject with reason…", then Dana's next DM: the hold is rejected with it,
// the requesting agent is told the reason, and the card shows it.
func TestRejectWithATypedReasonReachesTheRequester(t *testing.T) {
	e, dana := a2aEnv(t)
	e.startBridge()
	hold := e.A2AHold("drop the prod database")
	card := e.card(danaID, hold)
	e.tg.tap(danaID, card, "Reject with reason…")
	e.textTo(danaID, "Reply with the reason")
	e.edited(card, "Waiting for the reason from "+dana)
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("hold %s while the reason is awaited, want pending", st)
	}

	e.tg.say(danaID, danaID, "not during the freeze")
	e.edited(card, "❌ Rejected by "+dana+": “not during the freeze”")
	e.textTo(danaID, "rejected with your reason")
	notices := e.Pushes("ag_research", "notify")
	if len(notices) != 1 || !strings.Contains(notices[0].GetNotify().GetText(), "not during the freeze") {
		t.Fatalf("notices to research %v, want the reason", notices)
	}
	if r := e.Pushes("ag_research", "replay"); len(r) != 0 {
		t.Fatalf("a rejected hold was replayed: %v", r)
	}
}

// The bridge stopped mid-stream and started again neither drops nor
// repeats a card, and a tap made while it was down is carried out.
func TestRestartMidStreamNeitherDropsNorRepeatsACard(t *testing.T) {
	e := newEnv(t)
	dana := e.user(danaID, "owner", "")
	ctx := context.Background()
	appr := guardv1.NewApprovalsClient(e.Op)
	request := func(i int) string {
		resp, err := appr.Request(ctx, &guardv1.RequestRequest{
			Kind: "onecli_credential", Card: &guardv1.HoldCard{Title: fmt.Sprintf("Use key %d", i)},
			ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: dana}}},
		})
		if err != nil {
			t.Fatalf("Request %d: %v", i, err)
		}
		return resp.GetHold().GetId()
	}
	e.startBridge()
	var holds []string
	for i := range 8 {
		holds = append(holds, request(i))
	}
	// Stop while the burst is being carded.
	e.Eventually(wait, "the first cards", func() bool { return len(e.tg.cards()) >= 2 })
	e.StopBridge()
	sentBefore := len(e.tg.cards())

	// While it is down: more holds, one resolved elsewhere, and a tap.
	for i := 8; i < 11; i++ {
		holds = append(holds, request(i))
	}
	first := e.card(danaID, holds[0])
	e.tg.tap(danaID, first, "Approve")
	if _, err := appr.Resolve(ctx, &guardv1.ResolveRequest{Id: holds[1], Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: dana}); err != nil {
		t.Fatal(err)
	}

	e.startBridge()
	for _, h := range holds[2:] {
		e.card(danaID, h) // exactly one each (card fails on two)
	}
	e.edited(first, "Approved by "+dana)
	if st := e.HoldStatus(holds[0]); st != "approved" {
		t.Fatalf("the tap made while the bridge was down: hold %s, want approved", st)
	}
	// holds[1] was carded before the stop (cards go out in order) and
	// resolved while the bridge was down: its card is edited on restart.
	e.edited(e.card(danaID, holds[1]), "Rejected by "+dana)
	if got := len(e.tg.cards()); got != len(holds) {
		t.Fatalf("%d cards for %d holds (%d before the restart)", got, len(holds), sentBefore)
	}
	e.Eventually(wait, "the tap confirmed to Telegram", func() bool { return e.tg.unconfirmed() == 0 })

	// Health and metrics of the restarted bridge.
	if code, body := bridgetest.HTTPGet(t, "http://"+e.httpAddr+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	_, metrics := bridgetest.HTTPGet(t, "http://"+e.httpAddr+"/metrics")
	for _, want := range []string{`clawguard_telegram_cards_total{event="sent"}`, `clawguard_telegram_clicks_total{result="resolved"} 1`,
		`clawguard_telegram_cards_total{event="edited"}`, `clawguard_telegram_errors_total{op="send"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func cardsFor(cards []fakeMessage, holdID string) []fakeMessage {
	var out []fakeMessage
	for _, c := range cards {
		if strings.Contains(c.Text, holdID) {
			out = append(out, c)
		}
	}
	return out
}

// An expired hold's card says so and loses its buttons.
func TestExpiredHoldsCardSaysSo(t *testing.T) {
	e := newEnv(t)
	dana := e.user(danaID, "owner", "")
	e.startBridge()
	resp, err := guardv1.NewApprovalsClient(e.Op).Request(context.Background(), &guardv1.RequestRequest{
		Kind:         "onecli_credential",
		Card:         &guardv1.HoldCard{Title: "Use the deploy key", ExpiresAt: timestamppb.New(time.Now().Add(2 * time.Second))},
		ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: dana}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	card := e.card(danaID, resp.GetHold().GetId())
	ed := e.edited(card, "Expired without a decision")
	if len(ed.Buttons) != 0 {
		t.Fatalf("the expired card still has buttons: %v", ed.Buttons)
	}
	// A late tap changes nothing.
	e.tg.tap(danaID, card, "Approve")
	e.Eventually(wait, "the late tap answered", func() bool { return e.tg.unconfirmed() == 0 })
	if st := e.HoldStatus(resp.GetHold().GetId()); st != "expired" {
		t.Fatalf("hold %s after a late tap, want expired", st)
	}
}

// D4 for the reason capture: Dana picks "Reject with reason…" as research's
// admin, loses the role, then types: the reason is refused (she is told),
// the hold stays pending and the requester hears nothing.
func TestARevokedApproversReasonIsRefused(t *testing.T) {
	e := newEnv(t)
	e.Exec(`INSERT INTO agent_groups (id, name) VALUES ('ag_research', 'research')`)
	e.Exec(`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s_research', 'ag_research', 'r1')`)
	dana := e.user(danaID, "admin", "ag_research")
	e.startBridge()
	resp, err := guardv1.NewApprovalsClient(e.Op).Request(context.Background(), &guardv1.RequestRequest{
		Kind: "onecli_credential", SessionId: "s_research", Card: &guardv1.HoldCard{Title: "Use the deploy key"},
	})
	if err != nil {
		t.Fatal(err)
	}
	hold := resp.GetHold().GetId()
	card := e.card(danaID, hold)
	e.tg.tap(danaID, card, "Reject with reason…")
	e.edited(card, "Waiting for the reason from "+dana)
	e.Exec(`DELETE FROM user_roles WHERE user_id = $1`, dana)

	e.tg.say(danaID, danaID, "leaked key")
	e.textTo(danaID, "reject reason refused")
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("hold %s after a refused reason, want pending", st)
	}
	for _, p := range e.Pushes("ag_research", "notify") {
		if strings.Contains(p.GetNotify().GetText(), "leaked key") {
			t.Fatalf("the refused reason reached the requester: %q", p.GetNotify().GetText())
		}
	}
}

// A quorum policy names Dana and Erin and needs both: each gets a card,
// the first tap is recorded on both cards, the second approves and both
// cards say so.
func TestQuorumHoldCardsReachEveryNamedApprover(t *testing.T) {
	e, dana := a2aEnv(t)
	const erinID int64 = 43
	erin := e.user(erinID, "", "")
	e.Exec(`UPDATE agent_message_policies SET also_approvers = ARRAY[$1], approvals = 2`, erin)
	e.startBridge()
	hold := e.A2AHold("rotate the keys")
	danaCard, erinCard := e.card(danaID, hold), e.card(erinID, hold)

	e.tg.tap(danaID, danaCard, "Approve")
	e.edited(erinCard, "👍 "+dana+" approved (1 of 2 approvals)")
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("hold %s after one of two approvals, want pending", st)
	}
	e.tg.tap(erinID, erinCard, "Approve")
	e.edited(danaCard, "✅ Approved by "+erin)
	e.edited(erinCard, "✅ Approved by "+erin)
	if st := e.HoldStatus(hold); st != "approved" {
		t.Fatalf("hold %s after both approvals, want approved", st)
	}
}

// The control plane restarts under a running bridge: the bridge reports
// not ready while it is away, a message sent meanwhile is routed once it
// is back (not confirmed to Telegram before), and holds created after the
// restart get their cards, each once.
func TestServerRestartUnderTheBridgeLosesNothing(t *testing.T) {
	e := newEnv(t)
	dana := e.user(danaID, "owner", "")
	e.startBridge()
	appr := func() guardv1.ApprovalsClient { return guardv1.NewApprovalsClient(e.Op) }
	request := func(title string) string {
		t.Helper()
		resp, err := appr().Request(context.Background(), &guardv1.RequestRequest{
			Kind: "onecli_credential", Card: &guardv1.HoldCard{Title: title},
			ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: dana}}},
		})
		if err != nil {
			t.Fatalf("Request: %v", err)
		}
		return resp.GetHold().GetId()
	}
	before := request("before the restart")
	e.card(danaID, before)

	e.restartServer(func() {
		e.Eventually(wait, "/readyz failing while the server is down", func() bool {
			code, _ := bridgetest.HTTPGet(t, "http://"+e.httpAddr+"/readyz")
			return code == http.StatusServiceUnavailable
		})
		e.tg.say(strangerID, -3003, "hello while you were away")
	})
	e.Eventually(wait, "the message sent during the restart routed", func() bool {
		var n int
		_ = e.DB.QueryRow(context.Background(), `SELECT count(*) FROM messaging_groups WHERE channel_type = 'telegram' AND platform_id = '-3003'`).Scan(&n)
		return n == 1
	})
	after := request("after the restart")
	e.card(danaID, after)
	e.card(danaID, before) // still exactly one
	if got := len(e.tg.cards()); got != 2 {
		t.Fatalf("%d cards for 2 holds", got)
	}
	e.Eventually(wait, "/readyz again", func() bool {
		code, _ := bridgetest.HTTPGet(t, "http://"+e.httpAddr+"/readyz")
		return code == http.StatusOK
	})
}

// An outbox message for a chat id Telegram cannot have is skipped, not
// retried for ever: the messages after it are still delivered.
func TestAnOutboxMessageForANonTelegramChatDoesNotStopTheOutbox(t *testing.T) {
	e := newEnv(t)
	e.startBridge()
	e.Exec(`INSERT INTO chat_outbox (channel_type, platform_id, kind, text) VALUES
		('telegram', 'not-a-chat-id', 'reply', 'undeliverable'), ('telegram', $1, 'reply', 'the one after')`, fmt.Sprint(groupChat))
	e.textTo(groupChat, "the one after")
}

// Issue 32: a hold nobody answered is reminded (Dana gets the card again,
// once) and escalated (Erin, added by the escalation, gets a card and her
// tap approves it). The server's own sweep takes the steps.
func TestAReminderAndAnEscalationReachTelegram(t *testing.T) {
	e, _ := a2aEnv(t)
	const erinID int64 = 43
	erin := e.user(erinID, "", "")
	e.startBridge()
	hold := e.A2AHold("ship it")
	e.card(danaID, hold)
	// Both steps are due (the plan set on the hold as a policy would).
	e.Exec(`UPDATE holds SET remind_at = now() - interval '1 second', escalate_at = now() - interval '1 second', escalate_to = ARRAY[$1] WHERE id = $2`, erin, hold)
	erinCard := e.card(erinID, hold)
	reminder := bridgetest.Containing(e.World, "reminder to Dana", "Reminder: still waiting", func() []fakeMessage { return e.tg.sentTo(danaID) })
	if !strings.Contains(reminder.Text, hold) || len(reminder.Buttons) == 0 {
		t.Fatalf("the reminder is not the card again: %+v", reminder)
	}
	e.tg.tap(erinID, erinCard, "Approve")
	e.edited(erinCard, "✅ Approved by "+erin)
	e.edited(reminder, "✅ Approved by "+erin)
	if st := e.HoldStatus(hold); st != "approved" {
		t.Fatalf("hold %s after the escalated approver's tap, want approved", st)
	}
	if n := len(cardsFor(e.tg.sentTo(danaID), hold)); n != 2 {
		t.Fatalf("Dana got %d messages about the hold, want the card and one reminder", n)
	}
}
