package inbound_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fixture is one server on a fresh database, a bridge client calling
// RouteInbound and resolving holds as users, and the bridge's Approvals.Watch
// stream recorded from the first event on.
type fixture struct {
	t      *testing.T
	srv    *testserver.Server
	bridge testserver.Clients

	mu     sync.Mutex
	events []*guardv1.WatchResponse
}

const runnerID = "runner-a"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	t.Parallel() // each test has its own server and database
	srv := testserver.Start(t)
	f := &fixture{t: t, srv: srv}
	f.bridge = testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), ""))
	// A live runner, so opened sessions are placed on it.
	f.exec(`INSERT INTO runners (id, host, lease_expires_at) VALUES ($1, 'host-a', now() + interval '1 hour')`, runnerID)

	ctx, cancel := context.WithCancel(context.Background())
	stream, err := f.bridge.Approvals.Watch(ctx, &guardv1.WatchRequest{})
	if err != nil {
		cancel()
		t.Fatalf("Approvals.Watch: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled && ctx.Err() == nil {
					t.Errorf("Approvals.Watch ended: %v", err)
				}
				return
			}
			f.mu.Lock()
			f.events = append(f.events, ev)
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.srv.Pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.srv.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (f *fixture) str(sql string, args ...any) string {
	f.t.Helper()
	var s string
	if err := f.srv.Pool.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// eventually polls cond until it holds or 5 s pass.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	testserver.Eventually(f.t, 5*time.Second, what, cond)
}

// watched returns the recorded events of a type and hold kind.
func (f *fixture) watched(typ guardv1.EventType, kind string) []*guardv1.WatchResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*guardv1.WatchResponse
	for _, ev := range f.events {
		if ev.GetType() == typ && ev.GetHold().GetKind() == kind {
			out = append(out, ev)
		}
	}
	return out
}

// awaitEvent waits for the Watch event of a type about a hold.
func (f *fixture) awaitEvent(typ guardv1.EventType, holdID string) *guardv1.WatchResponse {
	f.t.Helper()
	var found *guardv1.WatchResponse
	f.eventually(typ.String()+" event for "+holdID, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, ev := range f.events {
			if ev.GetType() == typ && ev.GetHold().GetId() == holdID {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// requestedInDB counts the requested events of a kind in hold_events (the
// table Watch streams from): "no second card" is asserted on it.
func (f *fixture) requestedInDB(kind string) int {
	f.t.Helper()
	return f.count(`SELECT count(*) FROM hold_events e JOIN holds h ON h.id = e.hold_id
		WHERE e.type = 'requested' AND h.kind = $1`, kind)
}

func (f *fixture) route(m *guardv1.RouteInboundRequest) *guardv1.RouteInboundResponse {
	f.t.Helper()
	resp, err := f.bridge.Registry.RouteInbound(context.Background(), m)
	if err != nil {
		f.t.Fatalf("RouteInbound(%s/%s from %s): %v", m.GetChannelType(), m.GetPlatformId(), m.GetSenderUserId(), err)
	}
	return resp
}

// click resolves a hold as asUser through the bridge (Approvals.Resolve).
func (f *fixture) click(holdID, asUser string, outcome guardv1.Outcome, choice string) error {
	_, err := f.bridge.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{
		Id: holdID, Outcome: outcome, AsUser: asUser, Choice: choice,
	})
	return err
}

func (f *fixture) mustClick(holdID, asUser string, outcome guardv1.Outcome, choice string) {
	f.t.Helper()
	if err := f.click(holdID, asUser, outcome, choice); err != nil {
		f.t.Fatalf("resolve %s as %s (%s %q): %v", holdID, asUser, outcome, choice, err)
	}
}

func (f *fixture) wantDenied(holdID, asUser string, outcome guardv1.Outcome, choice string) {
	f.t.Helper()
	err := f.click(holdID, asUser, outcome, choice)
	if status.Code(err) != codes.PermissionDenied {
		f.t.Fatalf("resolve %s as %s (%q): got %v, want PermissionDenied", holdID, asUser, choice, err)
	}
}

func (f *fixture) user(id, role, group string) {
	f.t.Helper()
	f.exec(`INSERT INTO users (id) VALUES ($1) ON CONFLICT DO NOTHING`, id)
	if role != "" {
		f.exec(`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ($1, $2, NULLIF($3, ''))`, id, role, group)
	}
}

func (f *fixture) dm(user, channel, address string) {
	f.exec(`INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, $2, $3)`, user, channel, address)
}

func (f *fixture) group(id, name string) {
	f.exec(`INSERT INTO agent_groups (id, name) VALUES ($1, $2)`, id, name)
}

// delivered returns the DeliverMessage pushes stored for the group's
// sessions, and checks each went to the live runner.
func (f *fixture) delivered(groupID string) []*guardv1.DeliverMessage {
	f.t.Helper()
	rows, err := f.srv.Pool.Query(context.Background(), `SELECT p.body, COALESCE(p.runner_id, '') FROM runner_pushes p
		JOIN sessions s ON s.id = p.session_id
		WHERE s.agent_group_id = $1 AND p.kind = 'deliver' ORDER BY p.created_at`, groupID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []*guardv1.DeliverMessage
	for rows.Next() {
		var body []byte
		var runner string
		if err := rows.Scan(&body, &runner); err != nil {
			f.t.Fatal(err)
		}
		p := &guardv1.Push{}
		if err := proto.Unmarshal(body, p); err != nil {
			f.t.Fatal(err)
		}
		if runner != runnerID {
			f.t.Errorf("push %s went to runner %q, want the live runner %q", p.GetId(), runner, runnerID)
		}
		out = append(out, p.GetDeliver())
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func msgID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "msg-" + hex.EncodeToString(b)
}

func optionValues(h *guardv1.Hold) []string {
	var vs []string
	for _, o := range h.GetOptions() {
		vs = append(vs, o.GetValue())
	}
	return vs
}

func optionLabel(h *guardv1.Hold, value string) string {
	for _, o := range h.GetOptions() {
		if o.GetValue() == value {
			return o.GetLabel()
		}
	}
	return ""
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
