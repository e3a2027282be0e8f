package inbound_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// refuseDecisionLog makes every INSERT into the decision log fail as a full
// disk does (SQLSTATE 53100): the guard then cannot decide, since it refuses
// to answer what it cannot log; the returned func lifts it.
func (f *fixture) refuseDecisionLog() func() {
	f.t.Helper()
	pgtest.Exec(f.t, f.srv.Pool, `
		CREATE FUNCTION refuse_decision_log() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;
		CREATE TRIGGER refuse_decision_log BEFORE INSERT ON decisions FOR EACH ROW EXECUTE FUNCTION refuse_decision_log()`)
	return func() {
		f.t.Helper()
		pgtest.Exec(f.t, f.srv.Pool, `DROP TRIGGER refuse_decision_log ON decisions; DROP FUNCTION refuse_decision_log()`)
	}
}

// Issue 29 (5): a stranger's message routed while the database could not
// take the admission's hold was dropped for good ("approval could not be
// requested"), a verdict on the sender nobody made. It is Unavailable with a retry hint,
// nothing is recorded, and the bridge's next attempt asks for admission.
func TestAMessageTheGuardCouldNotDecideIsRetryableNotDropped(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	lift := f.refuseDecisionLog()
	_, err := f.bridge.Registry.RouteInbound(context.Background(), stranger("hi"))
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || api.RetryDelay(st) <= 0 {
		t.Fatalf("stranger's message while the guard cannot decide: %v, want Unavailable with a retry hint", err)
	}
	if n := f.count(`SELECT count(*) FROM dropped_messages`); n != 0 {
		t.Fatalf("%d messages recorded as dropped", n)
	}
	lift()
	f.ask("hi") // HELD with an admission card
}

// Issue 29 (6): an approved admission whose replay the guard could not
// decide was logged "approved sender not admitted" and dropped: the
// approval lost until the sender happened to write again. It is dispatched
// again once the guard can decide, and the sender is admitted once.
func TestAnApprovedAdmissionTheGuardCouldNotDecideIsCarriedOutLater(t *testing.T) {
	f := newSenderFixture(t, "request_approval")
	card := f.ask("hi")
	lift := f.refuseDecisionLog()
	f.mustClick(card.GetId(), owner, guardv1.Outcome_OUTCOME_APPROVE, "approve")
	testserver.Eventually(t, 10*time.Second, "the admission handed back for a later dispatch", func() bool {
		return f.count(`SELECT count(*) FROM holds WHERE id = $1 AND dispatch_attempts > 0 AND dispatched_at IS NULL`, card.GetId()) == 1
	})
	if f.isMember(strangerID, "ag-1") {
		t.Fatal("admitted while the guard could not decide")
	}
	lift()
	// The next dispatch is 10 s after the attempt; bring it forward.
	f.exec(`UPDATE holds SET dispatch_after = now() WHERE id = $1`, card.GetId())
	testserver.Eventually(t, 20*time.Second, "the stranger admitted", func() bool { return f.isMember(strangerID, "ag-1") })
	if n := f.count(`SELECT count(*) FROM holds WHERE id = $1 AND consumed_at IS NOT NULL`, card.GetId()); n != 1 {
		t.Fatalf("grant consumed %d times", n)
	}
}
