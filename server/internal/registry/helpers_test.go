package registry_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// exemptOnly is a manifest that conforms whatever the catalog holds.
func exemptOnly() []*guardv1.DeliveryActionDecl {
	return []*guardv1.DeliveryActionDecl{{Name: "cli_request"}, {Name: "schedule_task"}}
}

// testRunner is a runner process: one token (bound to its host and labels),
// one instance id.
type testRunner struct {
	id, instance, host string
	labels             map[string]string
	token              string
	srv                *testserver.Server
	c                  testserver.Clients
}

func newRunner(t *testing.T, srv *testserver.Server, id, host string, labels map[string]string) *testRunner {
	t.Helper()
	r := &testRunner{id: id, instance: "inst-" + randHex(), host: host, labels: labels, srv: srv, token: srv.RunnerToken(t, id, host, labels)}
	r.c = testserver.ClientsFor(srv.Conn(t, r.token, ""))
	return r
}

// on points the runner at another replica (same token, same instance).
func (r *testRunner) on(t *testing.T, srv *testserver.Server) *testRunner {
	cp := *r
	cp.srv = srv
	cp.c = testserver.ClientsFor(srv.Conn(t, r.token, ""))
	return &cp
}

func (r *testRunner) register(ctx context.Context) (*guardv1.RegisterRunnerResponse, error) {
	return r.c.Registry.RegisterRunner(ctx, &guardv1.RegisterRunnerRequest{
		RunnerId: r.id, InstanceId: r.instance, Host: r.host, Version: "test",
		Capabilities: []string{"process"}, Labels: r.labels, DeliveryActions: exemptOnly(),
	})
}

// expireLease ends a runner's lease (time moved forward in the table rather
// than waited for). The registry clock is stamped in the same statement: a
// test database is cloned from a template migrated minutes earlier, so the
// server's first sweep would otherwise read that age as a database outage
// and give every lease that lapsed since, this one included, a grace period.
func expireLease(t *testing.T, srv *testserver.Server, runnerID string) {
	t.Helper()
	// Clock first, then the runner: the sweep's lock order, so the two
	// cannot deadlock.
	err := pgx.BeginFunc(ctxT(t), srv.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctxT(t), `UPDATE registry_clock SET seen_at = now() WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.Exec(ctxT(t), `UPDATE runners SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, runnerID)
		return err
	})
	if err != nil {
		t.Fatalf("expire %s's lease: %v", runnerID, err)
	}
}

func (r *testRunner) mustRegister(t *testing.T) {
	t.Helper()
	if _, err := r.register(ctxT(t)); err != nil {
		t.Fatalf("register %s: %v", r.id, err)
	}
}

func (r *testRunner) open(t *testing.T, group string) *guardv1.Session {
	t.Helper()
	res, err := r.c.Registry.OpenSession(ctxT(t), &guardv1.OpenSessionRequest{AgentGroupId: group})
	if err != nil {
		t.Fatalf("%s opens a session of %s: %v", r.id, group, err)
	}
	return res.GetSession()
}

// stream is a connected runner stream collecting pushes.
type stream struct {
	s      grpc.BidiStreamingClient[guardv1.ConnectRequest, guardv1.ConnectResponse]
	cancel context.CancelFunc
	pushes chan *guardv1.Push
	leases chan *guardv1.LeaseRenewed
	mu     sync.Mutex
	err    error
	done   chan struct{}
}

func (r *testRunner) connect(t *testing.T) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := r.c.Registry.Connect(ctx)
	if err != nil {
		cancel()
		t.Fatalf("connect: %v", err)
	}
	if err := s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Hello{Hello: &guardv1.ConnectHello{RunnerId: r.id, InstanceId: r.instance}}}); err != nil {
		cancel()
		t.Fatalf("hello: %v", err)
	}
	st := &stream{s: s, cancel: cancel, pushes: make(chan *guardv1.Push, 100), leases: make(chan *guardv1.LeaseRenewed, 100), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		for {
			m, err := s.Recv()
			if err != nil {
				st.mu.Lock()
				st.err = err
				st.mu.Unlock()
				return
			}
			switch f := m.GetFrame().(type) {
			case *guardv1.ConnectResponse_Push:
				st.pushes <- f.Push
			case *guardv1.ConnectResponse_Lease:
				st.leases <- f.Lease
			}
		}
	}()
	t.Cleanup(st.close)
	return st
}

func (st *stream) close() {
	st.cancel()
	<-st.done
}

func (st *stream) next(t *testing.T) *guardv1.Push {
	t.Helper()
	select {
	case p := <-st.pushes:
		return p
	case <-st.done:
		t.Fatalf("stream ended before a push: %v", st.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no push within 10s")
	}
	return nil
}

func (st *stream) ack(t *testing.T, id string) {
	t.Helper()
	if err := st.s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Ack{Ack: &guardv1.PushAck{PushId: id, Ok: true}}}); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

func (st *stream) heartbeat(t *testing.T) *guardv1.LeaseRenewed {
	t.Helper()
	if err := st.s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Heartbeat{Heartbeat: &guardv1.Heartbeat{}}}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	select {
	case l := <-st.leases:
		return l
	case <-st.done:
		t.Fatalf("stream ended before the lease renewal: %v", st.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no lease renewal within 10s")
	}
	return nil
}

// keepAlive heartbeats on the stream until the test ends.
func (st *stream) keepAlive(every time.Duration) {
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-st.done:
				return
			case <-t.C:
				_ = st.s.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Heartbeat{Heartbeat: &guardv1.Heartbeat{}}})
				select {
				case <-st.leases:
				default:
				}
			}
		}
	}()
}

func group(t *testing.T, srv *testserver.Server, name, pinnedHost string) string {
	t.Helper()
	id := "ag_" + name + "_" + randHex()
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO agent_groups (id, name, pinned_host) VALUES ($1, $2, $3)`, id, name+"-"+randHex(), pinnedHost); err != nil {
		t.Fatal(err)
	}
	return id
}

func enqueue(t *testing.T, srv *testserver.Server, session, text string) string {
	t.Helper()
	var id string
	err := pgx.BeginFunc(ctxT(t), srv.Pool, func(tx pgx.Tx) error {
		var err error
		id, err = pushes.EnqueueTx(ctxT(t), tx, session, &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{Kind: guardv1.NoticeKind_NOTICE_KIND_INFO, Text: text}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testserver.Eventually(t, 15*time.Second, what, cond)
}

// allow inserts an ALLOW decision for the session (as the guard would log it).
func allow(t *testing.T, srv *testserver.Server, sessionID, action string, age time.Duration) string {
	t.Helper()
	return decision(t, srv, sessionID, action, "allow", age)
}

func decision(t *testing.T, srv *testserver.Server, sessionID, action, effect string, age time.Duration) string {
	t.Helper()
	id := "dec_" + randHex() + randHex()
	_, err := srv.Pool.Exec(ctxT(t), `INSERT INTO decisions (id, at, action, actor, actor_kind, agent_group_id, session_id, effect, reason)
		SELECT $1, now() - $2::interval, $3, jsonb_build_object('agent', jsonb_build_object('agent_group_id', agent_group_id, 'session_id', id)),
		       'agent', agent_group_id, id, $4, 'test'
		FROM sessions WHERE id = $5`, id, age, action, effect, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// grantedAllow inserts an approved, consumed hold with the payload and the
// ALLOW that consumed it (as the guard logs a replay with the grant).
func grantedAllow(t *testing.T, srv *testserver.Server, sessionID, action, kind string, p map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	hold := "h_" + randHex() + randHex()
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO holds (id, kind, catalog_action, payload, session_id, agent_group_id, status, resolved_at, consumed_at)
		SELECT $1, $2, $3, $4::jsonb, id, agent_group_id, 'approved', now(), now() FROM sessions WHERE id = $5`, hold, kind, action, string(raw), sessionID); err != nil {
		t.Fatal(err)
	}
	id := allow(t, srv, sessionID, action, 0)
	if _, err := srv.Pool.Exec(ctxT(t), `WITH d AS (UPDATE decisions SET grant_id = $1, decided_by = 'grant' WHERE id = $2)
		UPDATE holds SET consumed_by = $2 WHERE id = $1`, hold, id); err != nil {
		t.Fatal(err)
	}
	return id
}
