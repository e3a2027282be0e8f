package registry_test

import (
	"context"
	"testing"
	"time"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 13 (5): a database outage longer than a lease let every lease lapse
// (no heartbeat could be written), and the first sweep after it moved the
// sessions off healthy runners. The sweep now sees the gap in its own clock
// stamps (the database's now()) and gives the leases live when it began a
// grace period; a runner whose lease had lapsed before the gap still loses
// its sessions.
func TestDatabaseOutageLongerThanALeaseMovesNoSession(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, shortLease(3*time.Second))
	healthy := newRunner(t, srv, "runner-healthy", "h1", nil)
	healthy.mustRegister(t)
	dead := newRunner(t, srv, "runner-dead", "h2", nil)
	dead.mustRegister(t)
	kept := healthy.open(t, group(t, srv, "kept", ""))
	orphan := dead.open(t, group(t, srv, "orphan", ""))

	// An hour without the database: nothing stamped the clock, the healthy
	// runner's lease lapsed during it, the dead one's before it began.
	// The server's own sweep loop takes the same rows; a deadlock with it
	// (Postgres aborts one side) is retried by pgtest.Exec.
	pgtest.Exec(t, srv.Pool, `WITH clock AS (UPDATE registry_clock SET seen_at = now() - interval '1 hour')
		UPDATE runners SET lease_expires_at = now() - CASE id WHEN $1 THEN interval '30 minutes' ELSE interval '2 hours' END, expired_at = NULL
		WHERE id IN ($1, $2)`, healthy.id, dead.id)
	if err := srv.Deps().Registry.Sweep(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	owner := func(session string) string {
		var r *string
		if err := srv.Pool.QueryRow(ctxT(t), `SELECT runner_id FROM sessions WHERE id = $1`, session).Scan(&r); err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return ""
		}
		return *r
	}
	if got := owner(kept.GetId()); got != healthy.id {
		t.Fatalf("healthy runner's session moved to %q after the outage", got)
	}
	var live bool
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT lease_expires_at > now() AND expired_at IS NULL FROM runners WHERE id = $1`, healthy.id).Scan(&live); err != nil || !live {
		t.Fatalf("healthy runner's lease after the outage: live=%v (%v), want a grace period", live, err)
	}
	// Its next heartbeat renews the lease (no re-registration needed).
	st := healthy.connect(t)
	st.heartbeat(t)
	eventually(t, "the dead runner's session moved to the healthy runner", func() bool { return owner(orphan.GetId()) == healthy.id })
}

// Issue 13 (5): a push stored while its session moved went to the old
// runner. EnqueueTx and the move serialize on the session row: a move
// attempted while a push is being stored waits for it and carries it.
func TestPushQueuedDuringAMoveGoesToTheNewRunner(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	g, sess, newer, expire := sessionToMove(t, srv, "moving")

	tx, err := srv.Pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	pushID, err := pushes.EnqueueTx(ctxT(t), tx, sess.GetId(), &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{Text: "queued during the move"}}})
	if err != nil {
		t.Fatal(err)
	}
	expire()
	wait, done := startMove(t, srv, newer, g)
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !done {
		if err := wait(); err != nil {
			t.Fatalf("move: %v", err)
		}
	}
	var runner string
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT runner_id FROM runner_pushes WHERE id = $1`, pushID).Scan(&runner); err != nil || runner != newer.id {
		t.Fatalf("push stored during the move targets %q (%v), want the new runner %q", runner, err, newer.id)
	}
}

// The same for the replay an approval sends: Resolve locks the hold's
// session in its first round trip and stores the push with the event, so a
// move that starts while the resolution is in flight waits for it and
// carries the replay to the new runner.
func TestReplayPushResolvedDuringAMoveGoesToTheNewRunner(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	g, sess, newer, expire := sessionToMove(t, srv, "approving")
	owner := "telegram:owner-" + randHex()
	hold := "hold_moving_" + randHex()
	for _, q := range []string{
		`INSERT INTO users (id) VALUES ('` + owner + `')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('` + owner + `', 'owner')`,
		`INSERT INTO holds (id, kind, catalog_action, delivery_action, payload, session_id, agent_group_id, approver_rule, approver_scope)
			VALUES ('` + hold + `', 'install_packages', 'self_mod.install_packages', 'install_packages', '{"apt":["curl"]}',
			'` + sess.GetId() + `', '` + g + `', 'admins-of-scope', 'global')`,
	} {
		if _, err := srv.Pool.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}

	// Stall the resolution at its last statement, the event's INSERT.
	stall, err := srv.Pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stall.Rollback(context.Background()) }()
	if _, err := stall.Exec(ctxT(t), `LOCK TABLE hold_events IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	resolved := make(chan error, 1)
	go func() {
		_, err := srv.Deps().Approvals.Resolve(context.Background(), approvals.Resolution{HoldID: hold, Outcome: guardv1.Outcome_OUTCOME_APPROVE, Clicker: owner})
		resolved <- err
	}()
	eventually(t, "the resolution to wait at its event", func() bool { return waitingOnLock(t, srv, "INSERT INTO hold_events") })

	expire()
	wait, done := startMove(t, srv, newer, g)
	if done {
		t.Fatal("the session moved while its approval's replay was being stored")
	}
	if err := stall.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-resolved; err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if err := wait(); err != nil {
		t.Fatalf("move: %v", err)
	}
	var runner string
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT runner_id FROM runner_pushes WHERE hold_id = $1 AND kind = 'replay'`, hold).Scan(&runner); err != nil || runner != newer.id {
		t.Fatalf("the replay resolved during the move targets %q (%v), want the new runner %q", runner, err, newer.id)
	}
}

// sessionToMove is a session of a new group g on a runner whose lease is
// still live, and a live runner, newer, that a session of g can move to
// once expire has ended the first runner's lease. The lease ends only when
// the test has set up what the move must wait for: a live registration's
// sweep moves an orphaned session at once, before the test could stall it.
func sessionToMove(t *testing.T, srv *testserver.Server, name string) (g string, sess *guardv1.Session, newer *testRunner, expire func()) {
	t.Helper()
	g = group(t, srv, name, "")
	old := newRunner(t, srv, "runner-old", "h1", nil)
	old.mustRegister(t)
	sess = old.open(t, g)
	newer = newRunner(t, srv, "runner-new", "h2", nil)
	newer.mustRegister(t)
	return g, sess, newer, func() { expireLease(t, srv, old.id) }
}

// startMove asks to open a session of g (its session is on a runner
// whose lease expired, so this moves it) and returns once the move waits on
// the session row or has finished (done). wait yields the move's result.
func startMove(t *testing.T, srv *testserver.Server, to *testRunner, g string) (wait func() error, done bool) {
	t.Helper()
	moved := make(chan error, 1)
	go func() {
		_, err := to.c.Registry.OpenSession(context.Background(), &guardv1.OpenSessionRequest{AgentGroupId: g})
		moved <- err
	}()
	var result error
	eventually(t, "the move to block on the session row or finish", func() bool {
		select {
		case result = <-moved:
			done = true
			return true
		default:
		}
		return waitingOnLock(t, srv, "UPDATE sessions")
	})
	if done {
		if result != nil {
			t.Errorf("move: %v", result)
		}
		return func() error { return result }, true
	}
	return func() error { return <-moved }, false
}

// waitingOnLock: a statement containing query waits for a lock.
func waitingOnLock(t *testing.T, srv *testserver.Server, query string) bool {
	t.Helper()
	var waiting bool
	_ = srv.Pool.QueryRow(ctxT(t), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
		AND wait_event_type = 'Lock' AND query LIKE $1)`, "%"+query+"%").Scan(&waiting)
	return waiting
}
