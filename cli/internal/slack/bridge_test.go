package slack

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/cli/internal/bridge/bridgetest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

const (
	dana     = "UDANA"  // admin / approver
	erin     = "UERIN"  // a second approver
	owner    = "UOWNER" // owner
	stranger = "U0077"
	team     = "CTEAM"
)

// An unknown sender in a wired channel is held; Dana (admin of the wired
// group) gets the card in her DM, presses Allow, and the message reaches
// the agent; the agent's reply comes back to the channel.
func TestUnknownSenderAdmittedByAPressReachesTheAgent(t *testing.T) {
	e := newEnv(t)
	e.Exec(`INSERT INTO agent_groups (id, name) VALUES ('ag_research', 'research')`)
	danaID := e.User(dana, "admin", "ag_research")
	e.Exec(`INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group, unknown_sender_policy)
		VALUES ('mg_team', 'slack', $1, 'team', true, 'request_approval')`, team)
	e.Exec(`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('w1', 'mg_team', 'ag_research')`)
	e.startBridge()

	e.sl.say(stranger, team, "hello agent, can you help?")
	hold := e.HoldOf("sender_admit")
	e.textTo(team, "waiting for an admin")
	if n := len(e.Pushes("ag_research", "deliver")); n != 0 {
		t.Fatalf("%d messages reached the agent before admission", n)
	}
	card := e.card(dana, hold)
	e.sl.press(dana, card, "Allow")

	e.edited(card, "Approved by "+danaID)
	e.Eventually(wait, "the admitted message delivered", func() bool {
		for _, p := range e.Pushes("ag_research", "deliver") {
			if p.GetDeliver().GetText() == "hello agent, can you help?" && p.GetDeliver().GetSenderUserId() == "slack:"+stranger {
				return true
			}
		}
		return false
	})
	if name := e.Str(`SELECT display_name FROM users WHERE id = $1`, "slack:"+stranger); name != "Name of "+stranger {
		t.Errorf("the sender's name is %q, want users.info's display name", name)
	}

	// The agent answers into its chat: the reply reaches the channel as
	// plain text, its notification line escaped (an agent cannot mention
	// @channel).
	session := e.Str(`SELECT id FROM sessions WHERE agent_group_id = 'ag_research'`)
	if _, err := guardv1.NewRegistryClient(e.RunnerConn()).PostChatMessage(e.AsAgent(session),
		&guardv1.PostChatMessageRequest{Text: "Sure <!channel>, what do you need?"}); err != nil {
		t.Fatalf("PostChatMessage: %v", err)
	}
	reply := e.textTo(team, "what do you need?")
	if reply.Text != "Sure <!channel>, what do you need?" || reply.Top != "Sure &lt;!channel&gt;, what do you need?" {
		t.Fatalf("the reply went out as %q (notification %q), want plain text and an escaped notification", reply.Text, reply.Top)
	}
	if e.sl.unacked() != 0 {
		t.Fatalf("%d envelopes left unacknowledged", e.sl.unacked())
	}
}

// A new channel asks for registration; the owner gets the card in their
// DM, presses "New agent", sends the name as a DM, and the channel is wired
// to the new agent, which receives the first message.
func TestNewChannelRegisteredThroughTheOwnersDM(t *testing.T) {
	e := newEnv(t)
	e.Exec(`INSERT INTO agent_groups (id, name) VALUES ('ag_research', 'research')`)
	ownerID := e.User(owner, "owner", "")
	e.startBridge()

	const newChan = "CNEW"
	e.sl.say(stranger, newChan, "hi bot")
	hold := e.HoldOf("channel_registration")
	e.textTo(newChan, "not connected to an agent yet")
	card := e.card(owner, hold)
	if !strings.Contains(card.Text, "chan-cnew") {
		t.Errorf("the registration card does not name the channel (conversations.info): %q", card.Text)
	}
	e.sl.press(owner, card, "New agent")
	e.textTo(dmOf(owner), "name of the new agent")

	e.sl.say(owner, "", "helper")
	e.textTo(dmOf(owner), "created agent helper")
	e.edited(card, "Approved by "+ownerID+" — New agent")
	helper := e.Str(`SELECT id FROM agent_groups WHERE name = 'helper'`)
	wired := e.Str(`SELECT mg.platform_id FROM messaging_group_agents w JOIN messaging_groups mg ON mg.id = w.messaging_group_id
		WHERE w.agent_group_id = $1`, helper)
	if wired != newChan {
		t.Fatalf("helper is wired to chat %s, want %s", wired, newChan)
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

// a2aEnv: research asks to message ops, held for Dana alone (a policy).
func a2aEnv(t *testing.T) (*env, string) {
	e := newEnv(t)
	return e, e.A2A(dana)
}

// An a2a hold's card reaches Dana; a press by a Slack user who may not
// resolve it is refused and the card says so; Dana's press approves it and
// the card says that, without buttons.
func TestA2AHoldApprovedByDanasPressAndAStrangersRefused(t *testing.T) {
	e, danaID := a2aEnv(t)
	e.User(stranger, "", "")
	e.startBridge()
	hold := e.A2AHold("deploy at 5")
	card := e.card(dana, hold)
	if !strings.Contains(card.Text, "research wants to send ops: deploy at 5") {
		t.Fatalf("card text %q lacks the question", card.Text)
	}

	e.sl.press(stranger, card, "Approve")
	refused := e.edited(card, "⛔ slack:"+stranger+" may not decide this request.")
	if len(refused.Buttons) == 0 {
		t.Fatalf("the refusal note took the pending card's buttons away")
	}
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("after a stranger's press the hold is %s", st)
	}

	e.sl.press(dana, card, "Approve")
	ed := e.edited(card, "✅ Approved by "+danaID)
	if len(ed.Buttons) != 0 {
		t.Fatalf("the resolved card still has buttons: %v", ed.Buttons)
	}
	if st := e.HoldStatus(hold); st != "approved" {
		t.Fatalf("hold %s, want approved", st)
	}
	if r := e.Pushes("ag_research", "replay"); len(r) != 1 || r[0].GetReplay().GetHoldId() != hold {
		t.Fatalf("replay pushes %v, want one for %s", r, hold)
	}
	e.Eventually(wait, "Dana's press answered", func() bool {
		for _, a := range e.sl.ephemeralsTo(dana) {
			if a.Text == "Done." && a.Channel == dmOf(dana) {
				return true
			}
		}
		return false
	})
}

// "Reject with reason…" opens a form; the reason submitted in it rejects
// the hold, the requesting agent is told the reason, and the card shows it.
func TestRejectWithAReasonFromTheForm(t *testing.T) {
	e, danaID := a2aEnv(t)
	e.startBridge()
	hold := e.A2AHold("drop the prod database")
	card := e.card(dana, hold)
	e.sl.press(dana, card, "Reject with reason…")
	e.textTo(dmOf(dana), "Reply with the reason")
	e.edited(card, "Waiting for the reason from "+danaID)
	var form fakeView
	e.Eventually(wait, "the reason form opened", func() bool {
		v := e.sl.openedViews()
		if len(v) > 0 {
			form = v[0]
		}
		return len(v) > 0
	})
	if form.CallbackID != reasonForm || form.Metadata != hold || !strings.HasPrefix(form.TriggerID, "trigger-"+dana) {
		t.Fatalf("form %+v, want the reason form of %s opened with the press's trigger", form, hold)
	}
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("hold %s while the reason is awaited, want pending", st)
	}

	e.sl.submit(dana, reasonForm, hold, "not during the freeze")
	e.edited(card, "❌ Rejected by "+danaID+": “not during the freeze”")
	e.textTo(dmOf(dana), "rejected with your reason")
	notices := e.Pushes("ag_research", "notify")
	if len(notices) != 1 || !strings.Contains(notices[0].GetNotify().GetText(), "not during the freeze") {
		t.Fatalf("notices to research %v, want the reason", notices)
	}
	if r := e.Pushes("ag_research", "replay"); len(r) != 0 {
		t.Fatalf("a rejected hold was replayed: %v", r)
	}
}

// The reason may also come as the approver's next DM, as on Telegram.
func TestRejectWithAReasonAsTheNextDM(t *testing.T) {
	e, danaID := a2aEnv(t)
	e.startBridge()
	hold := e.A2AHold("rotate every key")
	card := e.card(dana, hold)
	e.sl.press(dana, card, "Reject with reason…")
	e.edited(card, "Waiting for the reason from "+danaID)

	e.sl.say(dana, "", "ask me tomorrow")
	e.edited(card, "❌ Rejected by "+danaID+": “ask me tomorrow”")
	e.textTo(dmOf(dana), "rejected with your reason")
	if st := e.HoldStatus(hold); st != "rejected" {
		t.Fatalf("hold %s, want rejected", st)
	}
}

// A form submitted by someone who may not resolve the hold rejects
// nothing: the server judges the submitter as it judges a press.
func TestAReasonFormOfAStrangerRejectsNothing(t *testing.T) {
	e, _ := a2aEnv(t)
	e.User(stranger, "", "")
	e.startBridge()
	hold := e.A2AHold("ship it")
	e.card(dana, hold)
	e.sl.submit(stranger, reasonForm, hold, "because I say so")
	e.textTo(dmOf(stranger), "reject reason refused")
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("hold %s after a stranger's form, want pending", st)
	}
}

// A quorum policy names Dana and Erin and needs both: each gets a card,
// the first press is noted on both, the second approves.
func TestQuorumHoldCardsReachEveryNamedApprover(t *testing.T) {
	e, danaID := a2aEnv(t)
	erinID := e.User(erin, "", "")
	e.Exec(`UPDATE agent_message_policies SET also_approvers = ARRAY[$1], approvals = 2`, erinID)
	e.startBridge()
	hold := e.A2AHold("rotate the keys")
	danaCard, erinCard := e.card(dana, hold), e.card(erin, hold)

	e.sl.press(dana, danaCard, "Approve")
	e.edited(erinCard, "👍 "+danaID+" approved (1 of 2 approvals)")
	e.sl.press(erin, erinCard, "Approve")
	e.edited(danaCard, "✅ Approved by "+erinID)
	e.edited(erinCard, "✅ Approved by "+erinID)
	if st := e.HoldStatus(hold); st != "approved" {
		t.Fatalf("hold %s after both approvals, want approved", st)
	}
}

// The Slack bridge's token acts only for Slack identities: approving as a
// Telegram user, routing a Telegram chat, reading Telegram's outbox and
// asking the guard as a Telegram human are refused, and the hold a
// Telegram approver may resolve stays pending.
func TestSlackBridgeTokenCannotActForTelegramUsers(t *testing.T) {
	e := newEnv(t)
	tg := "telegram:42"
	e.Exec(`INSERT INTO users (id) VALUES ($1)`, tg)
	e.Exec(`INSERT INTO user_roles (user_id, role) VALUES ($1, 'owner')`, tg)
	hold := e.RequestFor(tg, "the deploy key")
	conn := e.Srv.Dial(t, e.BridgeToken)
	ctx := context.Background()
	appr, rgy := guardv1.NewApprovalsClient(conn), guardv1.NewRegistryClient(conn)

	_, err := appr.Resolve(ctx, &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: tg})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the Slack bridge approving as %s: %v, want PermissionDenied", tg, err)
	}
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("hold %s after the refused approval", st)
	}
	_, err = rgy.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "42", SenderUserId: tg, Text: "hi", MessageId: "1"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the Slack bridge routing a Telegram chat: %v, want PermissionDenied", err)
	}
	_, err = rgy.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "slack", PlatformId: "CX", SenderUserId: tg, Text: "hi", MessageId: "1"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the Slack bridge routing a Telegram sender into a Slack chat: %v, want PermissionDenied", err)
	}
	out, err := rgy.WatchChatOutbox(ctx, &guardv1.WatchChatOutboxRequest{ChannelType: "telegram"})
	if err == nil {
		_, err = out.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the Slack bridge reading Telegram's outbox: %v, want PermissionDenied", err)
	}
	_, err = guardv1.NewGuardClient(conn).Decide(ctx, &guardv1.DecideRequest{Action: "senders.admit",
		Actor: &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: tg}}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the Slack bridge deciding as %s: %v, want PermissionDenied", tg, err)
	}
	// The same click as a Slack owner goes through: the refusal was the namespace.
	sl := e.User(owner, "owner", "")
	slHold := e.RequestFor(sl, "the other key")
	if _, err := appr.Resolve(ctx, &guardv1.ResolveRequest{Id: slHold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: sl}); err != nil {
		t.Fatalf("the Slack bridge approving as %s: %v", sl, err)
	}
}

// The bridge stopped and started again neither drops nor repeats a card;
// a message sent while it was down is routed once it is back (here
// dropped: no agent group to connect the channel to), and /readyz and
// /metrics tell.
func TestRestartNeitherDropsNorRepeatsACard(t *testing.T) {
	e := newEnv(t)
	danaID := e.User(dana, "owner", "")
	e.startBridge()
	first := e.RequestFor(danaID, "first")
	e.card(dana, first)
	e.StopBridge()

	second := e.RequestFor(danaID, "second, while stopped")
	e.sl.say(stranger, "CLATE", "hello while you were away")
	e.startBridge()
	e.card(dana, second)
	e.card(dana, first) // still exactly one
	e.Eventually(wait, "the message sent while stopped routed", func() bool {
		var n int
		_ = e.DB.QueryRow(context.Background(), `SELECT count(*) FROM messaging_groups WHERE channel_type = 'slack' AND platform_id = 'CLATE'`).Scan(&n)
		return n == 1
	})
	if got := len(e.sl.cards()); got != 2 {
		t.Fatalf("%d cards for 2 holds across a restart", got)
	}
	e.Eventually(wait, "every envelope acknowledged", func() bool { return e.sl.unacked() == 0 })
	if code, body := bridgetest.HTTPGet(t, "http://"+e.httpAddr+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	_, metrics := bridgetest.HTTPGet(t, "http://"+e.httpAddr+"/metrics")
	for _, want := range []string{`clawguard_slack_cards_total{event="sent"}`, `clawguard_slack_messages_in_total{outcome="dropped"} 1`,
		`clawguard_slack_errors_total{op="socket"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
