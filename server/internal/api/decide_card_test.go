package api_test

import (
	"context"
	"os"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The card of a held decision is the hold's payload, and the hold's payload
// is what runs on approval. Through Guard.Decide a runner could ask about a
// harmless, group-scoped admin command (members.add — a scoped admin may
// approve) while the card carried a cli_command for roles.grant (owner
// role: only an owner or global admin may approve that, D1); the approved
// replay ran roles.grant. Cards must describe the decided request.
func TestDecideRefusesACardThatDescribesAnotherRequest(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('g1', 'g1')`,
		`INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('g1', 'global')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'g1', 'r1')`,
		`INSERT INTO users (id) VALUES ('tg:scoped'), ('tg:mallory'), ('tg:new')`,
		`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('tg:scoped', 'admin', 'g1')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	guard := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1")).Guard
	decided, _ := structpb.NewStruct(map[string]any{"group": "g1", "user_id": "tg:new"})
	forged, _ := structpb.NewStruct(map[string]any{
		"method":  "/guard.v1.Registry/GrantRole",
		"request": map[string]any{"user_id": "tg:mallory", "role": "ROLE_OWNER", "scope": "ROLE_SCOPE_GLOBAL"},
		"caller":  map[string]any{"kind": "agent", "agent_group_id": "g1", "session_id": "s1"},
	})
	resp, err := guard.Decide(ctx, &guardv1.DecideRequest{Action: "members.add", Payload: decided,
		Card: &guardv1.HoldCard{Title: "CLI: members.add", Question: "add tg:new to g1?", Payload: forged}})
	if err == nil && resp.GetHoldId() != "" {
		// Show what the hold does when approved by the scoped admin.
		op := srv.Operator(t)
		_, rerr := op.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: resp.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "tg:scoped"})
		var owners int
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM user_roles WHERE user_id = 'tg:mallory' AND role = 'owner'`).Scan(&owners)
		t.Fatalf("a card describing another request made hold %s (scope %v); scoped admin's approval: %v; tg:mallory owner rows: %d",
			resp.GetHoldId(), resp.GetDecision().GetApproverScope(), rerr, owners)
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Decide with a card for another request: %v (%v), want InvalidArgument", resp, err)
	}
	var holds int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM holds`).Scan(&holds); err != nil || holds != 0 {
		t.Fatalf("holds = %d (%v), want none", holds, err)
	}
}
