package registry_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 41 (9): an ALLOW decided just before a freeze of the agent's
// runner was still applied — the apply's re-check planned the baseline
// without the runner, so the runner's freeze read nothing — while a freeze
// of its group refused it. A freeze of any scope committed before the
// apply now refuses it, and nothing is applied.
func TestAFreezeCommittedAfterTheAllowStopsItsApply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scope  string
		freeze func(f fixture) *guardv1.FreezeRequest
	}{
		{"runner", func(f fixture) *guardv1.FreezeRequest {
			return &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: f.r.id, Reason: "incident"}
		}},
		{"group", func(f fixture) *guardv1.FreezeRequest {
			return &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: f.group, Reason: "incident"}
		}},
	} {
		t.Run(tc.scope, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
			name := "child-" + tc.scope + "-" + randHex()
			create := map[string]any{"name": name}
			res, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "agents.create", Payload: payload(t, create)})
			if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
				t.Fatalf("decide before the freeze: %v (%v), want ALLOW", res.GetDecision(), err)
			}
			if _, err := f.srv.Operator(t).Registry.Freeze(ctxT(t), tc.freeze(f)); err != nil {
				t.Fatalf("freeze the %s: %v", tc.scope, err)
			}
			_, err = f.apply(t, res.GetDecisionId(), "agents.create", create, nil)
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "frozen") {
				t.Fatalf("apply after a freeze of the agent's %s: %v, want PermissionDenied naming the freeze", tc.scope, err)
			}
			var n int
			if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM agent_groups WHERE name = $1`, name).Scan(&n); err != nil || n != 0 {
				t.Fatalf("the frozen agent's group was created (%d, %v)", n, err)
			}
		})
	}
}
