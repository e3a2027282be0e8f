package api_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// bridgeWorld: an owner on telegram, a scoped admin on slack, a telegram
// chat with strict senders, and a cli_scope = global agent (through its
// runner) that asks to make a stranger owner: a global-scope roles.grant hold.
type bridgeWorld struct {
	srv                           *testserver.Server
	telegram, slack, legacy, user testserver.Clients
	agent                         testserver.Clients
	grantHold, chat               string
}

func newBridgeWorld(t *testing.T) *bridgeWorld {
	t.Helper()
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('g1', 'g1')`,
		`INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('g1', 'global')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'g1', 'r1')`,
		`INSERT INTO users (id) VALUES ('telegram:olivia'), ('slack:sam'), ('local:operator')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('telegram:olivia', 'owner'), ('local:operator', 'owner')`,
		`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('slack:sam', 'admin', 'g1')`,
		`INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group) VALUES ('mg-tg', 'telegram', 'chat-1', 'team', true)`,
		`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('w1', 'mg-tg', 'g1')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	w := &bridgeWorld{
		srv:      srv,
		telegram: testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), "")),
		slack:    testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "slack"), "")),
		legacy:   testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t), "")),
		user:     testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "slack:sam"), "")),
		agent:    testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1")),
		chat:     "mg-tg",
	}
	_, err := w.agent.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "telegram:stranger", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL})
	for _, d := range status.Convert(err).Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok {
			w.grantHold = p.GetHoldId()
		}
	}
	if w.grantHold == "" {
		t.Fatalf("the agent's roles.grant was not held: %v", err)
	}
	return w
}

func (w *bridgeWorld) pending(t *testing.T) {
	t.Helper()
	var st string
	if err := w.srv.Pool.QueryRow(context.Background(), `SELECT status FROM holds WHERE id = $1`, w.grantHold).Scan(&st); err != nil || st != "pending" {
		t.Fatalf("roles.grant hold is %q (%v), want still pending", st, err)
	}
	var owners int
	if err := w.srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM user_roles WHERE user_id = 'telegram:stranger'`).Scan(&owners); err != nil || owners != 0 {
		t.Fatalf("the stranger has %d roles (%v), want none", owners, err)
	}
}

func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("%s: %v, want PermissionDenied", what, err)
	}
}

// Issue 12, "a bridge token is an owner": Approvals.Resolve with as_user of
// any user, of any channel, approved a roles.grant as the owner and made a
// stranger owner. A bridge now clicks only as a user of its namespaces.
func TestAttackBridgeResolvesOnlyAsUsersOfItsChannel(t *testing.T) {
	w := newBridgeWorld(t)
	ctx := context.Background()
	approve := func(c testserver.Clients, as string) error {
		_, err := c.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: w.grantHold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: as})
		return err
	}
	wantDenied(t, "slack bridge approving as the telegram owner", approve(w.slack, "telegram:olivia"))
	wantDenied(t, "slack bridge approving as local:operator", approve(w.slack, "local:operator"))
	wantDenied(t, "telegram bridge approving as local:operator", approve(w.telegram, "local:operator"))
	wantDenied(t, "a bridge token without channels approving as the owner", approve(w.legacy, "telegram:olivia"))
	// In its namespace it is still only the user it names: the slack admin
	// is scoped, and a global hold is for owners (D1, as before).
	wantDenied(t, "slack bridge approving a global hold as a scoped admin", approve(w.slack, "slack:sam"))
	wantDenied(t, "user token approving as another user", approve(w.user, "telegram:olivia"))
	wantDenied(t, "user token approving as itself, a scoped admin", approve(w.user, ""))
	// Rejecting is a click too.
	_, err := w.slack.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: w.grantHold, Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: "telegram:olivia"})
	wantDenied(t, "slack bridge rejecting as the telegram owner", err)
	// Nor may it ask which holds another namespace's user could click.
	_, err = w.slack.Approvals.List(ctx, &guardv1.ListRequest{EligibleForMe: true, AsUser: "telegram:olivia"})
	wantDenied(t, "slack bridge listing holds eligible for a telegram user", err)
	w.pending(t)

	// The bridge of the owner's channel, clicking as the owner, passes every
	// identity check; but the hold is a global-scope admin command, which a
	// tap in chat cannot approve (step-up, issue 34): refused for that, not
	// for who the clicker is. Rejecting it from chat works.
	err = approve(w.telegram, "telegram:olivia")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "step-up") {
		t.Fatalf("telegram bridge approving the global admin command as the telegram owner: %v, want the step-up refusal", err)
	}
	if _, err := w.telegram.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: w.grantHold, Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: "telegram:olivia"}); err != nil {
		t.Fatalf("telegram bridge rejecting as the telegram owner: %v", err)
	}
}

// RouteInbound with any sender_user_id passed a strict chat's sender
// check; a bridge now routes only its channel's chats, for its users.
func TestAttackBridgeRoutesOnlyItsChannel(t *testing.T) {
	w := newBridgeWorld(t)
	ctx := context.Background()
	route := func(c testserver.Clients, channel, sender string) error {
		_, err := c.Registry.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: channel, PlatformId: "chat-1", IsGroup: true,
			SenderUserId: sender, MessageId: "m-" + sender, Text: "hi"})
		return err
	}
	wantDenied(t, "slack bridge routing a telegram chat", route(w.slack, "telegram", "telegram:olivia"))
	wantDenied(t, "slack bridge routing a telegram chat as a slack sender", route(w.slack, "telegram", "slack:sam"))
	wantDenied(t, "telegram bridge routing a sender of another namespace", route(w.telegram, "telegram", "slack:sam"))
	wantDenied(t, "a bridge token without channels routing", route(w.legacy, "telegram", "telegram:olivia"))
	var delivered int
	if err := w.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE messaging_group_id = 'mg-tg'`).Scan(&delivered); err != nil || delivered != 0 {
		t.Fatalf("refused routes opened %d sessions (%v)", delivered, err)
	}
	// Its own channel's chat and users go through (the strict chat still
	// decides about the sender itself).
	if err := route(w.telegram, "telegram", "telegram:olivia"); err != nil {
		t.Fatalf("telegram bridge routing its own chat: %v", err)
	}
	// Malformed input is still InvalidArgument, before any channel check.
	if err := route(w.slack, "", "slack:sam"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no channel type: %v, want InvalidArgument", err)
	}
}

// Through Guard.Decide a bridge asks only as a user of its namespaces, and
// only about chats of its channels; one without channels asks nothing.
func TestAttackBridgeDecidesOnlyInItsChannel(t *testing.T) {
	w := newBridgeWorld(t)
	ctx := context.Background()
	human := func(u string) *guardv1.Actor {
		return &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: u}}}
	}
	system := &guardv1.Actor{Kind: &guardv1.Actor_System{System: &guardv1.SystemActor{}}}
	decide := func(c testserver.Clients, actor *guardv1.Actor, action string) error {
		_, err := c.Guard.Decide(ctx, &guardv1.DecideRequest{Action: action, Actor: actor, Resource: map[string]string{"messaging_group": w.chat}})
		return err
	}
	wantDenied(t, "slack bridge deciding as the telegram owner", decide(w.slack, human("telegram:olivia"), "channels.register"))
	wantDenied(t, "slack bridge deciding about a telegram chat", decide(w.slack, human("slack:sam"), "senders.admit"))
	wantDenied(t, "slack bridge deciding about a telegram chat as the system", decide(w.slack, system, "senders.admit"))
	wantDenied(t, "a bridge token without channels deciding", decide(w.legacy, system, "senders.admit"))
	wantDenied(t, "a bridge asserting an agent (as before)", decide(w.telegram,
		&guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "g1", SessionId: "s1"}}}, "agents.create"))
	if err := decide(w.telegram, human("telegram:olivia"), "channels.register"); err != nil {
		t.Fatalf("telegram bridge deciding for its own chat and user: %v", err)
	}
	// Filing a hold asserts nobody: a bridge token without channels (a
	// credential gateway's) still may; guard-kind holds stay refused to
	// every bridge (as before).
	if _, err := w.legacy.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "onecli_credential", AgentGroupId: "g1", Card: &guardv1.HoldCard{Title: "use a key"}}); err != nil {
		t.Fatalf("a channel-less bridge (credential gateway) filing a credential hold: %v", err)
	}
	_, err := w.telegram.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "cli_command", AgentGroupId: "g1", Card: &guardv1.HoldCard{Title: "grant"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bridge requesting a guard-kind hold: %v, want InvalidArgument", err)
	}
}
