package api_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 32: an agent's admin command held for its group's admins and
// approved "for 1 hour" by a group admin runs again without a hold — until
// that admin's role is revoked: then the identical command is held again
// (for the owner), on the real decision path.
func TestStandingGrantOfAnAdminCommandEndsWithTheApproversRole(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('g1', 'g1')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'g1', 'r1')`,
		`INSERT INTO users (id) VALUES ('tg:gina'), ('tg:olivia')`,
		`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('tg:gina', 'admin', 'g1')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('tg:olivia', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	agent := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1"))
	gina := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "tg:gina"), ""))
	restart := func() (hold string, err error) {
		_, err = agent.Registry.RestartGroup(ctx, &guardv1.RestartGroupRequest{Group: "g1"})
		for _, d := range status.Convert(err).Details() {
			if p, ok := d.(*guardv1.ApprovalPending); ok {
				hold = p.GetHoldId()
			}
		}
		return hold, err
	}
	hold, err := restart()
	if status.Code(err) != codes.FailedPrecondition || hold == "" {
		t.Fatalf("the agent's restart of its group: %v, want held", err)
	}
	res, err := gina.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingFor: durationpb.New(time.Hour)})
	if err != nil || res.GetStandingGrant() == nil {
		t.Fatalf("gina approves for 1 hour: %v (%v)", res, err)
	}
	for i := range 3 {
		if hold, err := restart(); err != nil || hold != "" {
			t.Fatalf("identical restart %d under the standing grant: hold %q, %v; want it run", i, hold, err)
		}
	}
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE action = 'groups.restart' AND effect = 'allow' AND decided_by = $1`, guard.ByStanding).Scan(&n); err != nil || n != 3 {
		t.Fatalf("standing-grant ALLOWs of groups.restart logged = %d (%v), want 3", n, err)
	}
	// Another request (rebuild too) is not the approved one.
	if _, err := agent.Registry.RestartGroup(ctx, &guardv1.RestartGroupRequest{Group: "g1", RebuildImage: true}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a different restart: %v, want held", err)
	}
	if _, err := srv.Pool.Exec(ctx, `DELETE FROM user_roles WHERE user_id = 'tg:gina'`); err != nil {
		t.Fatal(err)
	}
	if hold, err := restart(); status.Code(err) != codes.FailedPrecondition || hold == "" {
		t.Fatalf("the identical restart after gina's role was revoked: %v, want held again", err)
	}
}
