package registry_test

import (
	"errors"
	"io"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func ackDeadline(d time.Duration) testserver.Option {
	return func(c *config.Config) { c.PushAckDeadline = d }
}

// Issue 13: a push the runner never acknowledged stayed unapplied until the
// stream reconnected. It is now sent again on the same live stream.
func TestUnackedPushIsSentAgainOnTheLiveStream(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, ackDeadline(time.Second))
	r := newRunner(t, srv, "runner-a", "h1", nil)
	r.mustRegister(t)
	sess := r.open(t, group(t, srv, "g", ""))
	st := r.connect(t)
	id := enqueue(t, srv, sess.GetId(), "dropped by the runner")
	if p := st.next(t); p.GetId() != id {
		t.Fatalf("push = %s, want %s", p.GetId(), id)
	}
	// Not acked: the same stream carries it again after the deadline.
	if p := st.next(t); p.GetId() != id {
		t.Fatalf("re-sent push = %s, want %s", p.GetId(), id)
	}
	st.ack(t, id)
	// The ack is stored before the heartbeat is answered; the answer says
	// how long the renewed lease lasts (the runner fences itself by it).
	if l := st.heartbeat(t); l.GetTtl().AsDuration() != srv.Deps().Config.LeaseTTL {
		t.Fatalf("renewal ttl = %v, want the server's %v", l.GetTtl().AsDuration(), srv.Deps().Config.LeaseTTL)
	}
	var acked bool
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT acked_at IS NOT NULL FROM runner_pushes WHERE id = $1`, id).Scan(&acked); err != nil || !acked {
		t.Fatalf("push acked = %v (%v)", acked, err)
	}
}

// Acks are written in batches by a goroutine of their own; a release waits
// for the ones read before it, so a session's next runner is never sent
// what this one acked. With the pushes' rows locked the ack statement
// waits, and so must the release; once the lock goes, the acks are stored
// by the time the released lease can be taken over.
func TestAcksBeforeAReleaseAreStored(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, shortLease(time.Minute))
	first := newRunner(t, srv, "runner-a", "h1", nil)
	first.mustRegister(t)
	sess := first.open(t, group(t, srv, "g", ""))
	st := first.connect(t)
	var ids []string
	for range 20 {
		ids = append(ids, enqueue(t, srv, sess.GetId(), "acked, then released"))
	}
	for range ids {
		st.next(t)
	}
	lock, err := srv.Pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctxT(t)) }()
	if _, err := lock.Exec(ctxT(t), `SELECT 1 FROM runner_pushes WHERE id = ANY($1) FOR UPDATE`, ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st.ack(t, id)
	}
	if err := st.s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Release{Release: &guardv1.LeaseRelease{}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ack statement to wait for the lock", func() bool {
		var n int
		err := srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE runner_pushes SET acked_at%'`).Scan(&n)
		return err == nil && n > 0
	})
	var instance string
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT instance_id FROM runners WHERE id = $1`, first.id).Scan(&instance); err != nil || instance != first.instance {
		t.Fatalf("lease holder while the acks wait: %q (%v), want %q: released before the acks were stored", instance, err, first.instance)
	}
	if err := lock.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	second := *first
	second.instance = "inst-restarted"
	eventually(t, "the released lease to be taken over", func() bool {
		_, err := second.register(ctxT(t))
		return err == nil
	})
	var unacked int
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM runner_pushes WHERE id = ANY($1) AND acked_at IS NULL`, ids).Scan(&unacked); err != nil || unacked != 0 {
		t.Fatalf("%d of %d pushes acked before the release are not stored (%v)", unacked, len(ids), err)
	}
}

// A burst larger than the window is sent a window at a time: acks open it.
func TestPushWindowBoundsPushesInFlight(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	r := newRunner(t, srv, "runner-a", "h1", nil)
	r.mustRegister(t)
	sess := r.open(t, group(t, srv, "g", ""))
	const window, total = 256, 300 // registry.Options default window
	want := map[string]bool{}
	for i := 0; i < total; i++ {
		want[enqueue(t, srv, sess.GetId(), "burst")] = true
	}
	st := r.connect(t)
	got := map[string]bool{}
	var order []string
	for len(got) < window {
		p := st.next(t)
		if !want[p.GetId()] || got[p.GetId()] {
			t.Fatalf("unexpected or repeated push %s", p.GetId())
		}
		got[p.GetId()] = true
		order = append(order, p.GetId())
	}
	st.heartbeat(t)
	if n := len(st.pushes); n != 0 {
		t.Fatalf("%d pushes beyond the window of %d were sent before any ack", n, window)
	}
	for _, id := range order[:window/2] {
		st.ack(t, id)
	}
	for len(got) < total {
		p := st.next(t)
		if got[p.GetId()] {
			t.Fatalf("push %s sent twice before its deadline", p.GetId())
		}
		got[p.GetId()] = true
	}
}

// Issue 13: a cleanly stopped runner kept its lease, so its restart waited
// for the lease to expire. A released lease is taken over at once, and the
// runner's sessions stay with it.
func TestReleasedLeaseLetsTheRunnerRegisterAgainAtOnce(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, shortLease(time.Minute))
	first := newRunner(t, srv, "runner-a", "h1", nil)
	first.mustRegister(t)
	sess := first.open(t, group(t, srv, "g", ""))
	st := first.connect(t)
	st.heartbeat(t)
	if err := st.s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Release{Release: &guardv1.LeaseRelease{}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end the stream after the release")
	}
	if !errors.Is(st.err, io.EOF) {
		t.Fatalf("stream ended with %v, want a clean end", st.err)
	}
	second := *first
	second.instance = "inst-restarted"
	if _, err := second.register(ctxT(t)); err != nil {
		t.Fatalf("restart after a release: %v, want the lease at once", err)
	}
	var owner string
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT runner_id FROM sessions WHERE id = $1`, sess.GetId()).Scan(&owner); err != nil || owner != first.id {
		t.Fatalf("session owner = %q (%v), want %s", owner, err, first.id)
	}
	// The released instance cannot renew any more.
	s, err := first.c.Registry.Connect(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Hello{Hello: &guardv1.ConnectHello{RunnerId: first.id, InstanceId: first.instance}}})
	if _, err := s.Recv(); err == nil {
		t.Fatal("the released instance connected again")
	}
}

// A runner may hang up right after its release frame (it is exiting): the
// release still takes effect.
func TestReleaseTakesEffectWhenTheRunnerHangsUpAtOnce(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, shortLease(time.Minute))
	first := newRunner(t, srv, "runner-a", "h1", nil)
	first.mustRegister(t)
	st := first.connect(t)
	st.heartbeat(t)
	if err := st.s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Release{Release: &guardv1.LeaseRelease{}}}); err != nil {
		t.Fatal(err)
	}
	st.close()
	second := *first
	second.instance = "inst-restarted"
	eventually(t, "the restarted instance to register", func() bool {
		_, err := second.register(ctxT(t))
		return err == nil
	})
}
