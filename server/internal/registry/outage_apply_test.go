package registry_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 29 (6): in an 8 s Postgres outage one approved hold was never
// applied, its grant consumed. The window: the replay was allowed (the grant
// consumed), then its ApplyAction met the database shutting down (FATAL
// 57P01 mid-transaction) and was answered Internal, which the runner takes
// as final — it told the agent "not delivered", acknowledged the push, and
// the hold waited for the reconciler. A database shutting down is
// Unavailable with a retry hint: nothing was applied, and the same citation,
// asked again once the database is back, applies it once.
func TestAnApplyCutByTheDatabaseShuttingDownIsRetriedWithTheSameCitation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approved := map[string]any{"apt": []any{"curl"}}
	hold := approvedHold(t, f.srv, f.sess.GetId(), "install_packages", "self_mod.install_packages", approved)
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	replay := &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload(t, approved), Grant: hold, RequestId: "replay:" + hold}
	res, err := asAgent.Guard.Decide(ctxT(t), replay)
	if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay: %v (%v), want ALLOW", res.GetDecision(), err)
	}

	// The apply's last write waits at the cut; the database then kills the
	// session under it, as a fast shutdown does.
	cut := testserver.CutAt(t, f.srv.Pool, "session_events", `NEW.kind = 'action'`)
	answer := make(chan error, 1)
	go func() {
		_, err := f.apply(t, res.GetDecisionId(), "self_mod.install_packages", approved, nil)
		answer <- err
	}()
	cut.Terminate(15 * time.Second)
	err = <-answer
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || api.RetryDelay(st) <= 0 {
		t.Fatalf("apply cut by a shutdown: %v, want Unavailable with a retry hint (the runner retries only that)", err)
	}
	var applied bool
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT applied_at IS NOT NULL FROM holds WHERE id = $1`, hold).Scan(&applied); err != nil || applied {
		t.Fatalf("hold applied by the cut transaction (%v)", err)
	}

	cut.Lift()
	if _, err := f.apply(t, res.GetDecisionId(), "self_mod.install_packages", approved, nil); err != nil {
		t.Fatalf("the same citation once the database is back: %v", err)
	}
	assertAppliedOnce(t, f.srv, f.sess.GetId(), "self_mod.install_packages")
	var apt []string
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT apt_packages FROM container_configs WHERE agent_group_id = $1`, f.group).Scan(&apt); err != nil || len(apt) != 1 {
		t.Fatalf("apt = %v (%v), want [curl]", apt, err)
	}
}
