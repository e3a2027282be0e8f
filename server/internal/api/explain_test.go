package api_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func exec(t *testing.T, srv *testserver.Server, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := srv.Pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// The "why" of a decision is one message: a dry run (ncl explain) and the
// logged decision it predicts (ncl decisions get, the console) explain it
// identically, from the facts read when deciding — a policy removed later
// does not rewrite the explanation of a decision it caused.
func TestExplanationIsTheSameForExplainAndTheLoggedDecision(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	exec(t, srv,
		`INSERT INTO agent_groups (id, name) VALUES ('research', 'research'), ('ops', 'ops')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'research', 'r1')`,
		`INSERT INTO users (id) VALUES ('telegram:dana')`,
		`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('research', 'ops', 'ops')`,
		`INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('research', 'ops', 'telegram:dana')`,
	)
	op := srv.Operator(t)
	actor := &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "research", SessionId: "s1"}}}
	dry, err := op.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Actor: actor,
		Resource: map[string]string{"to": "ops"}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	x := dry.GetExplanation()
	if want := "held because the message policy research → ops names telegram:dana; no policy → allow"; x.GetSummary() != want {
		t.Fatalf("summary = %q, want %q", x.GetSummary(), want)
	}
	if len(x.GetChecks()) != 3 || x.GetChecks()[2].GetOutcome() != "hold" ||
		x.GetChecks()[2].GetFacts()[0].GetValue() != "telegram:dana" || !x.GetEntry().GetInCatalog() {
		t.Fatalf("checks = %v", x.GetChecks())
	}
	if len(x.GetWouldChange()) == 0 || !strings.Contains(x.GetWouldChange()[0], "no message policy research → ops → allow") {
		t.Fatalf("would change = %v", x.GetWouldChange())
	}

	// The runner's real decision is logged with its trace.
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1")).Guard
	real, err := runner.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": "ops"}})
	if err != nil || real.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("runner decide: %v %v", real, err)
	}
	if real.GetExplanation() != nil {
		t.Errorf("a real decision carried an explanation on the hot path")
	}
	// Removing the policy afterwards must not change why it was held.
	exec(t, srv, `DELETE FROM agent_message_policies`)
	got, err := op.Registry.GetDecision(ctx, &guardv1.GetDecisionRequest{Id: real.GetDecisionId()})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetDecision().GetExplanation(), x) {
		t.Fatalf("logged explanation differs from explain:\n got %v\nwant %v", got.GetDecision().GetExplanation(), x)
	}
	// And the dry run now predicts an allow, with its own counterfactual.
	dry2, err := op.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Actor: actor,
		Resource: map[string]string{"to": "ops"}, DryRun: true})
	if err != nil || !strings.HasPrefix(dry2.GetExplanation().GetSummary(), "allowed because the destination research → ops exists") {
		t.Fatalf("after removing the policy: %v %v", dry2.GetExplanation(), err)
	}

	// Read scoping: a scoped admin of another group cannot read it (NotFound),
	// nor ask the guard about research's agents.
	exec(t, srv, `INSERT INTO users (id) VALUES ('telegram:eve')`,
		`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:eve', 'admin', 'ops')`)
	eve := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "telegram:eve"), ""))
	if _, err := eve.Registry.GetDecision(ctx, &guardv1.GetDecisionRequest{Id: real.GetDecisionId()}); status.Code(err) != codes.NotFound {
		t.Errorf("another group's admin read the decision: %v", err)
	}
	if _, err := eve.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Actor: actor,
		Resource: map[string]string{"to": "ops"}, DryRun: true}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("another group's admin asked about research: %v", err)
	}
	// A user never decides for real, even about their own group.
	if _, err := eve.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send",
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ops"}}},
		Resource: map[string]string{"to": "research"}}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a user made a real decision: %v", err)
	}
	// Dana (no roles) may ask about herself only.
	dana := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "telegram:dana"), ""))
	if _, err := dana.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "catalog.list", DryRun: true,
		Actor: &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "telegram:dana"}}}}); err != nil {
		t.Errorf("dana asking about herself: %v", err)
	}
}
