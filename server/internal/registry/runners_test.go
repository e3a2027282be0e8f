package registry_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func shortLease(ttl time.Duration) testserver.Option {
	return func(c *config.Config) { c.LeaseTTL = ttl }
}

// representativeManifest is the real runner's delivery registry as
// documented (runner/internal/delivery): the four guarded actions and the
// cli_request bridge.
func representativeManifest() []*guardv1.DeliveryActionDecl {
	return []*guardv1.DeliveryActionDecl{
		{Name: "create_agent", CatalogAction: "agents.create"},
		{Name: "install_packages", CatalogAction: "self_mod.install_packages"},
		{Name: "add_mcp_server", CatalogAction: "self_mod.add_mcp_server"},
		{Name: "send_message", CatalogAction: "a2a.send"},
		{Name: "cli_request"},
	}
}

func TestRegisterRefusesNonConformingManifestListingEveryViolation(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	r := newRunner(t, srv, "runner-rogue", "h1", nil)
	_, err := r.c.Registry.RegisterRunner(ctxT(t), &guardv1.RegisterRunnerRequest{
		RunnerId: r.id, InstanceId: r.instance, Host: "h1",
		DeliveryActions: []*guardv1.DeliveryActionDecl{
			{Name: "cli_request"},
			{Name: "schedule_task"},
			{Name: "test_rogue_privileged_action"},
			{Name: "create_agent", CatalogAction: "agents.create_anything"},
			{Name: "wipe_disk"},
		},
	})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("code = %v (%v), want FailedPrecondition", st.Code(), err)
	}
	var listed []string
	for _, d := range st.Details() {
		if v, ok := d.(*guardv1.ConformanceViolations); ok {
			listed = v.GetViolations()
		}
	}
	want := []string{
		`delivery action "test_rogue_privileged_action" is neither guard-mapped nor on the declared exemption list`,
		`delivery action "create_agent" maps to unregistered guard action "agents.create_anything"`,
		`delivery action "wipe_disk" is neither guard-mapped nor on the declared exemption list`,
	}
	if strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations detail =\n%s\nwant\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range want {
		if !strings.Contains(st.Message(), w) {
			t.Errorf("message %q does not name %q", st.Message(), w)
		}
	}
	if got := testutil.ToFloat64(srv.Deps().Metrics.ConformanceRefusalsTotal); got != 1 {
		t.Errorf("conformance refusals = %v, want 1", got)
	}
	var n int
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM runners WHERE id = $1`, r.id).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused runner stored (%d rows, %v)", n, err)
	}
}

// The CI walk: the real runner's manifest against the real server catalog
// conforms, and a rogue registration on top of it is refused.
func TestCIWalkRealManifestConformsRogueRegistrationFails(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	if v := registry.Violations(representativeManifest(), srv.Deps().Registry.Catalog()); len(v) != 0 {
		t.Fatalf("the runner's manifest does not conform to the server catalog:\n%s", strings.Join(v, "\n"))
	}
	r := newRunner(t, srv, "runner-ci", "h1", nil)
	res, err := r.c.Registry.RegisterRunner(ctxT(t), &guardv1.RegisterRunnerRequest{
		RunnerId: r.id, InstanceId: r.instance, Host: "h1", DeliveryActions: representativeManifest(),
	})
	if err != nil {
		t.Fatalf("register the real manifest: %v", err)
	}
	if !res.GetLeaseExpiresAt().AsTime().After(time.Now()) || res.GetHeartbeatInterval().AsDuration() <= 0 {
		t.Errorf("lease %v / heartbeat %v", res.GetLeaseExpiresAt().AsTime(), res.GetHeartbeatInterval().AsDuration())
	}
	// The runner fences itself by the lease's length (issue 29): it is told it.
	if ttl := res.GetLeaseTtl().AsDuration(); ttl != srv.Deps().Config.LeaseTTL {
		t.Errorf("lease ttl = %v, want the server's %v", ttl, srv.Deps().Config.LeaseTTL)
	}
	if strings.Join(res.GetExemptActions(), ",") != strings.Join(registry.ExemptDeliveryActions, ",") {
		t.Errorf("exempt actions = %v", res.GetExemptActions())
	}
	var stored string
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT delivery_actions::text FROM runners WHERE id = $1`, r.id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, `"catalog_action": "agents.create"`) {
		t.Errorf("stored manifest = %s", stored)
	}

	rogue := append(representativeManifest(), &guardv1.DeliveryActionDecl{Name: "test_rogue_privileged_action"})
	_, err = r.c.Registry.RegisterRunner(ctxT(t), &guardv1.RegisterRunnerRequest{RunnerId: r.id, InstanceId: r.instance, DeliveryActions: rogue})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "test_rogue_privileged_action") {
		t.Fatalf("rogue registration: %v, want FailedPrecondition naming it", err)
	}
}

func TestRunnerTokenIsBoundToItsRunnerID(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	a := newRunner(t, srv, "runner-a", "h1", nil)
	a.id = "runner-b" // runner-a's token, claiming runner-b
	if _, err := a.register(ctxT(t)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("register as another runner: %v, want PermissionDenied", err)
	}
	user := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", "slack:alice"), ""))
	if _, err := user.Registry.RegisterRunner(ctxT(t), &guardv1.RegisterRunnerRequest{RunnerId: "runner-a", InstanceId: "x"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("user token registering: %v, want PermissionDenied", err)
	}
}

func TestLiveRunnerIDIsRefusedUntilTheLeaseExpires(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, shortLease(3*time.Second))
	first := newRunner(t, srv, "runner-a", "h1", nil)
	first.mustRegister(t)
	first.mustRegister(t) // the same process re-registering renews

	second := *first
	second.instance = "inst-second"
	if _, err := second.register(ctxT(t)); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second process on a live id: %v, want AlreadyExists", err)
	}
	// Once the first process stops renewing, the lease expires and the id is free.
	eventually(t, "the second process to take over the id", func() bool {
		_, err := second.register(ctxT(t))
		return err == nil
	})
	// The first process lost its lease: its stream is refused.
	s, err := first.c.Registry.Connect(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Hello{Hello: &guardv1.ConnectHello{RunnerId: first.id, InstanceId: first.instance}}})
	if _, err := s.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stale instance connecting: %v, want FailedPrecondition", err)
	}
}

func TestConnectHelloMustMatchTheToken(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	a := newRunner(t, srv, "runner-a", "h1", nil)
	a.mustRegister(t)
	s, err := a.c.Registry.Connect(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Hello{Hello: &guardv1.ConnectHello{RunnerId: "runner-b", InstanceId: a.instance}}})
	if _, err := s.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("hello for another runner: %v, want PermissionDenied", err)
	}
}

func TestLeaseExpiryMovesSessionsRespectingPinsAndRetargetsPushes(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, shortLease(3*time.Second))
	pinned := group(t, srv, "pinned", "h1")
	free := group(t, srv, "free", "")

	dying := newRunner(t, srv, "runner-dying", "h1", nil)
	dying.mustRegister(t)
	sPinned := dying.open(t, pinned)
	sFree := dying.open(t, free)
	if sPinned.GetRunnerId() != dying.id {
		t.Fatalf("session runner = %q", sPinned.GetRunnerId())
	}
	pushID := enqueue(t, srv, sPinned.GetId(), "waiting for whoever hosts me")

	// Two live runners: only one of them is on host h1 (by label).
	other := newRunner(t, srv, "runner-other-host", "h2", nil)
	other.mustRegister(t)
	otherStream := other.connect(t)
	otherStream.keepAlive(100 * time.Millisecond)
	sameHost := newRunner(t, srv, "runner-same-host", "box-7", map[string]string{"host": "h1"})
	sameHost.mustRegister(t)
	sameStream := sameHost.connect(t)
	sameStream.keepAlive(100 * time.Millisecond)

	// A runner can't open a session of a group pinned elsewhere.
	if _, err := other.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: pinned}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("open a pinned group on another host: %v, want PermissionDenied", err)
	}
	// Nor take over a session of a live runner.
	if _, err := sameHost.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: pinned}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("open a live runner's session: %v, want PermissionDenied", err)
	}

	// The dying runner stops heartbeating; its lease runs out (time moved
	// forward in the table rather than waited for).
	expireLease(t, srv, dying.id)
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
	eventually(t, "the dead runner's sessions to move", func() bool {
		return owner(sPinned.GetId()) != dying.id && owner(sFree.GetId()) != dying.id
	})
	if got := owner(sPinned.GetId()); got != sameHost.id {
		t.Fatalf("pinned session moved to %q, want %q (the runner labelled host=h1)", got, sameHost.id)
	}
	if got := owner(sFree.GetId()); got != other.id && got != sameHost.id {
		t.Fatalf("free session moved to %q", got)
	}
	// The unacked push followed the session to its new runner's stream.
	var got []string
	for len(got) < 2 {
		p := sameStream.next(t)
		got = append(got, p.GetId())
		if p.GetId() == pushID {
			if p.GetNotify().GetText() != "waiting for whoever hosts me" || p.GetSessionId() != sPinned.GetId() {
				t.Fatalf("push = %v", p)
			}
			sameStream.ack(t, p.GetId())
			break
		}
	}
	if !contains(got, pushID) {
		t.Fatalf("pushes on the new owner's stream = %v, want %s", got, pushID)
	}
	if n := testutil.ToFloat64(srv.Deps().Metrics.LeaseExpirationsTotal); n != 1 {
		t.Errorf("lease expirations = %v, want 1", n)
	}
	eventually(t, "the live-runner gauge", func() bool { return testutil.ToFloat64(srv.Deps().Metrics.RunnersLive) == 2 })
}

// Every replica sweeps; an expiry is counted once and a session moved once.
func TestConcurrentSweepsCountAndMoveOnce(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t, shortLease(3*time.Second))
	b := testserver.StartOn(t, a.URL, shortLease(3*time.Second))
	dying := newRunner(t, a, "runner-dying", "h1", nil)
	dying.mustRegister(t)
	var sessions []string
	for i := range 5 {
		sessions = append(sessions, dying.open(t, group(t, a, fmt.Sprintf("g%d", i), "")).GetId())
	}
	live := newRunner(t, b, "runner-live", "h2", nil)
	live.mustRegister(t)
	live.connect(t).keepAlive(100 * time.Millisecond)
	expireLease(t, a, dying.id)
	eventually(t, "every session to move to the live runner", func() bool {
		var n int
		if err := a.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM sessions WHERE id = ANY($1) AND runner_id = $2`, sessions, live.id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(sessions)
	})
	eventually(t, "both replicas to have swept past the expiry", func() bool {
		var claimed bool
		_ = a.Pool.QueryRow(ctxT(t), `SELECT expired_at IS NOT NULL FROM runners WHERE id = $1`, dying.id).Scan(&claimed)
		return claimed
	})
	expirations := testutil.ToFloat64(a.Deps().Metrics.LeaseExpirationsTotal) + testutil.ToFloat64(b.Deps().Metrics.LeaseExpirationsTotal)
	if expirations != 1 {
		t.Errorf("lease expirations across replicas = %v, want 1", expirations)
	}
	var moves, starts, told int
	err := a.Pool.QueryRow(ctxT(t), `SELECT
		(SELECT count(*) FROM session_events WHERE session_id = ANY($1) AND body->>'event' = 'session_moved'),
		(SELECT count(*) FROM runner_pushes WHERE session_id = ANY($1) AND kind = 'start'),
		(SELECT count(*) FROM runner_pushes WHERE session_id = ANY($1) AND kind = 'notify' AND runner_id = $2)`, sessions, live.id).Scan(&moves, &starts, &told)
	if err != nil {
		t.Fatal(err)
	}
	if moves != len(sessions) || starts != len(sessions) {
		t.Fatalf("moves=%d start pushes=%d, want %d each (one per session)", moves, starts, len(sessions))
	}
	// Issue 45: each moved session's agent is told it moved, on its new runner.
	if told != len(sessions) {
		t.Fatalf("moved-session notices to the new runner = %d, want %d (one per session)", told, len(sessions))
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestPushSurvivesServerRestartAndIsAppliedOnce(t *testing.T) {
	t.Parallel()
	srv1 := testserver.Start(t)
	g := group(t, srv1, "g", "")
	r := newRunner(t, srv1, "runner-a", "h1", nil)
	r.mustRegister(t)
	sess := r.open(t, g)
	first := enqueue(t, srv1, sess.GetId(), "first")

	// Delivered, not acked (the runner crashed before applying): delivered again.
	st := r.connect(t)
	if p := st.next(t); p.GetId() != first {
		t.Fatalf("push = %s, want %s", p.GetId(), first)
	}
	st.close()

	// The replica goes away; another one on the same database takes over.
	srv1.Stop()
	srv2 := testserver.StartOn(t, srv1.URL)
	r2 := r.on(t, srv2)
	st2 := r2.connect(t)
	p := st2.next(t)
	if p.GetId() != first || p.GetNotify().GetText() != "first" || p.GetSessionId() != sess.GetId() || p.GetAgentGroupId() != g {
		t.Fatalf("after restart push = %v, want %s", p, first)
	}
	st2.ack(t, p.GetId())
	st2.ack(t, p.GetId()) // acks are idempotent
	st2.heartbeat(t)      // frames are handled in order: the acks are stored
	var acked, attempts int
	if err := srv2.Pool.QueryRow(ctxT(t), `SELECT count(*) FILTER (WHERE acked_at IS NOT NULL), max(attempts) FROM runner_pushes WHERE id = $1`, first).Scan(&acked, &attempts); err != nil {
		t.Fatal(err)
	}
	if acked != 1 || attempts != 2 {
		t.Fatalf("acked=%d attempts=%d, want 1 and 2", acked, attempts)
	}
	// A live push arrives on the open stream (NOTIFY) ...
	second := enqueue(t, srv2, sess.GetId(), "second")
	if p := st2.next(t); p.GetId() != second {
		t.Fatalf("live push = %s, want %s", p.GetId(), second)
	}
	st2.close()
	// ... and after a reconnect the acked push is never sent again: the
	// first push on the new stream is the unacked second one.
	st3 := r2.connect(t)
	if p := st3.next(t); p.GetId() != second {
		t.Fatalf("after reconnect push = %s, want %s (the acked one must not come back)", p.GetId(), second)
	}
}

func TestPushReachesTheRunnerWhicheverReplicaItIsConnectedTo(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	b := testserver.StartOn(t, a.URL)
	g := group(t, a, "g", "")
	r := newRunner(t, a, "runner-a", "h1", nil)
	r.mustRegister(t)
	sess := r.open(t, g)
	st := r.on(t, b).connect(t)
	st.heartbeat(t) // the stream is up on replica b
	id := enqueue(t, a, sess.GetId(), "via replica a")
	if p := st.next(t); p.GetId() != id {
		t.Fatalf("push = %s, want %s", p.GetId(), id)
	}
}

func TestFailedPushIsSentAgainThenAbandoned(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	r := newRunner(t, srv, "runner-a", "h1", nil)
	r.mustRegister(t)
	sess := r.open(t, group(t, srv, "g", ""))
	first := enqueue(t, srv, sess.GetId(), "fails once")
	st := r.connect(t)
	if p := st.next(t); p.GetId() != first {
		t.Fatalf("push = %s", p.GetId())
	}
	nack := func(id string) {
		t.Helper()
		if err := st.s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Ack{Ack: &guardv1.PushAck{PushId: id, Ok: false, Error: "docker hiccup"}}}); err != nil {
			t.Fatal(err)
		}
		st.heartbeat(t) // the nack is stored before the heartbeat is answered
	}
	nack(first)
	second := enqueue(t, srv, sess.GetId(), "wakes the stream")
	if p := st.next(t); p.GetId() != first {
		t.Fatalf("after a failure the push comes again first (oldest); got %s", p.GetId())
	}
	if p := st.next(t); p.GetId() != second {
		t.Fatalf("push = %s, want %s", p.GetId(), second)
	}
	var (
		lastErr  string
		attempts int
		acked    bool
	)
	read := func(id string) {
		t.Helper()
		if err := srv.Pool.QueryRow(ctxT(t), `SELECT last_error, attempts, acked_at IS NOT NULL FROM runner_pushes WHERE id = $1`, id).Scan(&lastErr, &attempts, &acked); err != nil {
			t.Fatal(err)
		}
	}
	read(first)
	if lastErr != "docker hiccup" || attempts != 2 || acked {
		t.Fatalf("failed push: error=%q attempts=%d acked=%v", lastErr, attempts, acked)
	}
	// After MaxPushAttempts the server gives up: recorded, no longer pending.
	if _, err := srv.Pool.Exec(ctxT(t), `UPDATE runner_pushes SET attempts = $2 WHERE id = $1`, second, registry.MaxPushAttempts); err != nil {
		t.Fatal(err)
	}
	nack(second)
	read(second)
	if !acked || lastErr != "docker hiccup" {
		t.Fatalf("abandoned push: acked=%v error=%q", acked, lastErr)
	}
}

func TestOpenSession(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	g := group(t, srv, "g", "")
	a := newRunner(t, srv, "runner-a", "h1", nil)

	// No lease yet: register first.
	if _, err := a.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: g}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("open before registering: %v, want FailedPrecondition", err)
	}
	a.mustRegister(t)
	if _, err := a.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "agent_group_id") {
		t.Fatalf("open without a group: %v, want InvalidArgument naming agent_group_id", err)
	}
	if _, err := a.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: "ag_nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("open an unknown group: %v, want NotFound", err)
	}
	if _, err := a.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: g, MessagingGroupId: "mg_nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("open with an unknown messaging group: %v, want NotFound", err)
	}
	s1 := a.open(t, g)
	// A runner's --group may name the group (issue 45): the same session.
	var name string
	if err := srv.Pool.QueryRow(ctxT(t), `SELECT name FROM agent_groups WHERE id = $1`, g).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if byName := a.open(t, name); byName.GetId() != s1.GetId() || byName.GetAgentGroupId() != g {
		t.Fatalf("open by the group's name = %v, want session %s of %s", byName, s1.GetId(), g)
	}
	if s2 := a.open(t, g); s2.GetId() != s1.GetId() || s2.GetRunnerId() != a.id || s2.GetStatus() != guardv1.SessionStatus_SESSION_STATUS_ACTIVE {
		t.Fatalf("second open = %v, want the same active session %s", s2, s1.GetId())
	}

	// A dead runner's session is taken over by the runner that opens it,
	// with its pending pushes.
	pending := enqueue(t, srv, s1.GetId(), "still mine")
	expireLease(t, srv, a.id)
	b := newRunner(t, srv, "runner-b", "h2", nil)
	b.mustRegister(t)
	taken := b.open(t, g)
	if taken.GetId() != s1.GetId() || taken.GetRunnerId() != b.id {
		t.Fatalf("take over = %v, want %s on %s", taken, s1.GetId(), b.id)
	}
	st := b.connect(t)
	seen := map[string]bool{}
	for !seen[pending] {
		p := st.next(t)
		seen[p.GetId()] = true
	}
}
