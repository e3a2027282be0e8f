package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A dry run is no oracle across groups (issue 29): a user asks only about
// what they may read, and an object of another group reads exactly as one
// that does not exist — to an agent asking through its runner as well.

// oracleWorld: dana administers "mine" (session s-mine); "theirs" is
// eve's, with a chat wired to it that holds strangers for approval, a
// pending channel registration and everything else a decision could read.
// Nothing of "theirs" is reachable from "mine".
func oracleWorld(t *testing.T, srv *testserver.Server) {
	t.Helper()
	exec(t, srv,
		`INSERT INTO agent_groups (id, name) VALUES ('mine', 'mine'), ('theirs', 'theirs'), ('third', 'third')`,
		`INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('theirs', 'global')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s-mine', 'mine', 'r1'), ('s-theirs', 'theirs', 'r1')`,
		`INSERT INTO users (id) VALUES ('telegram:nobody'), ('telegram:dana'), ('telegram:eve'), ('telegram:olga')`,
		`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:dana', 'admin', 'mine'), ('telegram:eve', 'admin', 'theirs')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('telegram:olga', 'owner')`,
		`INSERT INTO messaging_groups (id, channel_type, platform_id, unknown_sender_policy) VALUES
			('mg-theirs', 'telegram', 'p1', 'request_approval'), ('mg-open', 'telegram', 'p2', 'public'),
			('mg-new', 'telegram', 'p3', 'strict'), ('mg-mine', 'telegram', 'p4', 'request_approval')`,
		`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES
			('w1', 'mg-theirs', 'theirs'), ('w2', 'mg-open', 'theirs'), ('w3', 'mg-mine', 'mine')`,
		`INSERT INTO pending_channel_registrations (messaging_group_id, agent_group_id, approver_user_id) VALUES ('mg-new', NULL, 'telegram:olga')`,
		`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('theirs', 'third', 'third')`,
		`INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('theirs', 'third', 'telegram:eve')`,
	)
}

// nameSpots are the places a request can name an object: resource keys and
// payload fields the catalog's entries read.
var nameSpots = []struct{ resource, payload string }{
	{resource: "messaging_group"}, {resource: "agent_group"}, {resource: "to"},
	{payload: "messaging_group_id"}, {payload: "questionId"}, {payload: "agent_group_id"},
	{payload: "group"}, {payload: "id"}, {payload: "from_group"}, {payload: "to_group"}, {payload: "target_group"},
}

// dryRun asks as c and returns the answer (or refusal) in bytes, with the
// named id, the decision id and every timestamp taken out.
func dryRun(t *testing.T, c testserver.Clients, action string, actor *guardv1.Actor, resource map[string]string, payload map[string]any, id string) string {
	t.Helper()
	return decideAs(t, c, true, action, actor, resource, payload, id)
}

// decideAs is dryRun for a dry run or a real decision.
func decideAs(t *testing.T, c testserver.Clients, dry bool, action string, actor *guardv1.Actor, resource map[string]string, payload map[string]any, id string) string {
	t.Helper()
	p, err := structpb.NewStruct(payload)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: action, Actor: actor,
		Resource: resource, Payload: p, DryRun: dry})
	var out string
	if err != nil {
		out = fmt.Sprintf("%s: %s", status.Code(err), status.Convert(err).Message())
	} else {
		resp.DecisionId = ""
		b, _ := protojson.Marshal(resp)
		out = string(b)
	}
	return strings.ReplaceAll(out, id, "<ID>")
}

func TestDryRunsAreNoOracleAcrossGroups(t *testing.T) {
	srv := testserver.Start(t)
	oracleWorld(t, srv)
	type asker struct {
		name, user string
		c          testserver.Clients
		actors     map[string]*guardv1.Actor
	}
	human := func(u string) *guardv1.Actor {
		return &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: u}}}
	}
	agent := func(g, s string) *guardv1.Actor {
		return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: g, SessionId: s}}}
	}
	askers := []asker{
		{name: "a user with no role", user: "telegram:nobody", actors: map[string]*guardv1.Actor{"themself": human("telegram:nobody")}},
		{name: "a scoped admin of mine", user: "telegram:dana", actors: map[string]*guardv1.Actor{
			"themself": human("telegram:dana"), "their agent": agent("mine", "s-mine")}},
	}
	for i := range askers {
		askers[i].c = testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", askers[i].user), ""))
	}
	// An agent of mine, through its runner (the header names its session).
	askers = append(askers, asker{name: "an agent of mine", c: testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s-mine")),
		actors: map[string]*guardv1.Actor{"itself": nil}})
	// Objects of another group, each against an id that names nothing.
	pairs := []struct{ exists, ghost string }{
		{"theirs", "ghost-group"}, {"mg-theirs", "mg-ghost"}, {"mg-new", "mg-ghost"},
	}
	type probe struct {
		what     string
		c        testserver.Clients
		action   string
		actor    *guardv1.Actor
		resource map[string]string
		payload  map[string]any
		id       string
	}
	type comparison struct {
		what          string
		exists, ghost probe
	}
	var cases []comparison
	for _, e := range srv.Deps().Guard.Catalog.List() {
		for _, a := range askers {
			for actorName, actor := range a.actors {
				for _, spot := range nameSpots {
					for _, p := range pairs {
						mk := func(id string) probe {
							res, pay := map[string]string{}, map[string]any{"name": "x", "apt": []any{"jq"}}
							if spot.resource != "" {
								res[spot.resource] = id
							} else {
								pay[spot.payload] = id
							}
							return probe{c: a.c, action: e.Action, actor: actor, resource: res, payload: pay, id: id}
						}
						cases = append(cases, comparison{what: fmt.Sprintf("%s asks %s about %s naming %s in %s%s",
							a.name, e.Action, actorName, p.exists, spot.resource, spot.payload), exists: mk(p.exists), ghost: mk(p.ghost)})
					}
				}
			}
			if a.actors["their agent"] != nil {
				// The actor's own session: another group's, or none at all.
				for _, p := range [][2]string{{"s-theirs", "s-ghost"}} {
					mk := func(id string) probe {
						return probe{c: a.c, action: e.Action, actor: agent("mine", id), resource: map[string]string{}, payload: map[string]any{}, id: id}
					}
					cases = append(cases, comparison{what: fmt.Sprintf("%s asks %s about their group's agent in session %s", a.name, e.Action, p[0]),
						exists: mk(p[0]), ghost: mk(p[1])})
				}
			}
		}
	}
	ask := func(p probe) string { return dryRun(t, p.c, p.action, p.actor, p.resource, p.payload, p.id) }
	// A few at a time: the comparisons are independent.
	work := make(chan comparison)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				got, ghost := ask(c.exists), ask(c.ghost)
				if got != ghost {
					mu.Lock()
					t.Errorf("%s: the answer tells it exists\n exists: %s\n ghost:  %s", c.what, got, ghost)
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()
	t.Logf("%d pairs of dry runs compared", len(cases))
	if len(cases) < 1000 {
		t.Fatalf("only %d comparisons", len(cases))
	}
}

// What the fix must not take away: a user still explains what they may
// read (a scoped admin their group's chat; an owner anything), and a chat
// they may not read is NotFound, the same words as one that does not exist.
func TestDryRunsStillExplainWhatTheAskerMayRead(t *testing.T) {
	srv := testserver.Start(t)
	oracleWorld(t, srv)
	ctx := context.Background()
	dana := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "telegram:dana"), ""))
	olga := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "telegram:olga"), ""))
	admit := func(c testserver.Clients, user, chat string) (*guardv1.DecideResponse, error) {
		return c.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "senders.admit", DryRun: true,
			Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: user}}},
			Resource: map[string]string{"messaging_group": chat}})
	}
	if r, err := admit(dana, "telegram:dana", "mg-mine"); err != nil || r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("dana about her group's chat: %v %v, want HOLD", r, err)
	}
	if r, err := admit(olga, "telegram:olga", "mg-theirs"); err != nil || r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("an owner about any chat: %v %v, want HOLD", r, err)
	}
	_, err1 := admit(dana, "telegram:dana", "mg-theirs")
	_, err2 := admit(dana, "telegram:dana", "mg-ghost")
	if status.Code(err1) != codes.NotFound || strings.ReplaceAll(err1.Error(), "mg-theirs", "X") != strings.ReplaceAll(err2.Error(), "mg-ghost", "X") {
		t.Fatalf("another group's chat %v, a missing one %v: want the same NotFound", err1, err2)
	}
}

// A bridge asks only about chats of its channels: another channel's chat
// is refused in the words used for a chat that does not exist.
func TestBridgeDecisionsAreNoOracleOfOtherChannels(t *testing.T) {
	srv := testserver.Start(t)
	oracleWorld(t, srv)
	exec(t, srv, `INSERT INTO messaging_groups (id, channel_type, platform_id, unknown_sender_policy) VALUES ('mg-slack', 'slack', 's1', 'public')`,
		`INSERT INTO users (id) VALUES ('slack:sam')`)
	slack := testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "slack"), ""))
	for _, action := range []string{"senders.admit", "channels.register"} {
		for _, dry := range []bool{true, false} {
			// Every place a request can name its chat.
			for _, spot := range nameSpots[:5] {
				ask := func(chat string) string {
					res, pay := map[string]string{}, map[string]any{}
					if spot.resource != "" {
						res[spot.resource] = chat
					} else {
						pay[spot.payload] = chat
					}
					return decideAs(t, slack, dry, action, &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "slack:sam"}}}, res, pay, chat)
				}
				got, ghost := ask("mg-theirs"), ask("mg-ghost")
				if got != ghost {
					t.Errorf("slack bridge, %s (dry run %v) naming the chat in %s%s: a telegram chat answers %q, a missing one %q",
						action, dry, spot.resource, spot.payload, got, ghost)
				}
			}
		}
	}
	if r, err := slack.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "senders.admit", DryRun: true,
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "slack:sam"}}},
		Resource: map[string]string{"messaging_group": "mg-slack"}}); err != nil || r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("slack bridge about its own public chat: %v %v", r, err)
	}
}

// Every entry whose facts read values from the request declares what they
// name, so a user's dry run can be kept to what the user may read.
func TestEveryEntryThatReadsTheRequestDeclaresWhatItNames(t *testing.T) {
	cat, err := app.BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cat.List() {
		if e.Args != nil && e.Names == nil {
			t.Errorf("%s reads the request (Args) but declares no Names", e.Action)
		}
	}
}

// An agent cannot file an admission card for a chat (of another group, or
// any): senders.admit is decided for a chat's sender, and the refusal
// shows none of the chat's facts.
func TestAgentCannotAskForASendersAdmission(t *testing.T) {
	srv := testserver.Start(t)
	oracleWorld(t, srv)
	agent := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s-mine"))
	payload, _ := structpb.NewStruct(map[string]any{"messaging_group_id": "mg-theirs", "agent_group_id": "theirs", "sender_user_id": "telegram:mallory"})
	resp, err := agent.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "senders.admit",
		Resource: map[string]string{"messaging_group": "mg-theirs", "agent_group": "theirs"}, Payload: payload,
		Card: &guardv1.HoldCard{Title: "👤 New sender", Question: "mallory wants in", Payload: payload}})
	if err != nil || resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || resp.GetHoldId() != "" {
		t.Fatalf("an agent asking to admit a sender: %v %v, want DENY and no hold", resp, err)
	}
	var holds int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM holds`).Scan(&holds); err != nil || holds != 0 {
		t.Fatalf("%d holds (%v), want none", holds, err)
	}
	if strings.Contains(resp.GetDecision().GetReason(), "theirs") || strings.Contains(resp.GetDecision().GetReason(), "request_approval") {
		t.Fatalf("the refusal names the chat's facts: %q", resp.GetDecision().GetReason())
	}
}
