package sessions

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/runtime/process"
	"github.com/clawguard/clawguard/runner/internal/runtime/runtimetest"
)

// fakeRegistry answers GetGroup (as the asserted session) and GetSession:
// session "gone" was moved to another runner.
type fakeRegistry struct {
	guardv1.UnimplementedRegistryServer
	version  atomic.Int64
	asserted atomic.Value
}

func (f *fakeRegistry) GetGroup(ctx context.Context, req *guardv1.GetGroupRequest) (*guardv1.GetGroupResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(SessionHeader); len(v) > 0 {
		f.asserted.Store(v[0])
	}
	return &guardv1.GetGroupResponse{Group: &guardv1.Group{Id: req.GetId(), Config: &guardv1.GroupConfig{Version: f.version.Load()}}}, nil
}

func (f *fakeRegistry) GetSession(_ context.Context, req *guardv1.GetSessionRequest) (*guardv1.GetSessionResponse, error) {
	if req.GetId() == "gone" {
		return nil, status.Error(codes.PermissionDenied, "runner does not host session")
	}
	return &guardv1.GetSessionResponse{Session: &guardv1.Session{Id: req.GetId()}}, nil
}

func newManager(t *testing.T) (*Manager, *fakeRegistry, *process.Runtime) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRegistry{}
	f.version.Store(1)
	srv := grpc.NewServer()
	guardv1.RegisterRegistryServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	dir, err := os.MkdirTemp("", "cgs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	rt := process.New(process.Config{InstallID: "t", StopTimeout: time.Second})
	m := New(Config{
		DataDir: dir, Runtime: rt, AgentBase: runtimetest.BuildSleeper(t), Conn: conn,
		Engine:  &delivery.Engine{Registry: delivery.NewRegistry(nil)},
		Gateway: gateway.Options{Known: func(string) bool { return false }},
	})
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m, f, rt
}

func running(rt *process.Runtime, id string) bool {
	ids, _ := rt.Running(context.Background())
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestPushesWakeRestartAndReconcile(t *testing.T) {
	m, f, rt := newManager(t)
	ctx := context.Background()

	// A delivery to a session the runner has never seen sets it up and starts it.
	err := m.Apply(ctx, &guardv1.Push{Id: "p1", SessionId: "s1", AgentGroupId: "g1",
		Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{MessageId: "m1", Text: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Get("s1")
	if s == nil || s.Inbox.Len() != 1 || !running(rt, "s1") {
		t.Fatalf("session after delivery: %+v running=%v", s, running(rt, "s1"))
	}
	if fi, err := os.Stat(s.Socket); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o666 {
		t.Fatalf("gateway socket: %v %v", fi, err)
	}
	if got, _ := f.asserted.Load().(string); got != "s1" {
		t.Fatalf("group config read as session %q, want s1", got)
	}
	if filepath.Dir(s.Dir) != filepath.Join(m.cfg.DataDir, "sessions") {
		t.Fatalf("session dir %s", s.Dir)
	}

	// Stopped (idle), then a notice push wakes it.
	if err := rt.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, &guardv1.Push{Id: "p2", SessionId: "s1", AgentGroupId: "g1",
		Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{Kind: guardv1.NoticeKind_NOTICE_KIND_REJECTED, Text: "no"}}}); err != nil {
		t.Fatal(err)
	}
	if !running(rt, "s1") || s.Inbox.Len() != 2 {
		t.Fatal("notice push did not wake the session")
	}

	// A rebuild for a config version already running is skipped; a newer one restarts.
	runtimetest.ReadReport(t, s.Dir) // waits for the agent's start report
	restart := func(id string, v int64) {
		if err := m.Apply(ctx, &guardv1.Push{Id: id, SessionId: "s1", AgentGroupId: "g1",
			Body: &guardv1.Push_Restart{Restart: &guardv1.RestartContainer{RebuildImage: true, ConfigVersion: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	startedBefore, _ := os.Stat(filepath.Join(s.Dir, "started.json"))
	restart("p3", 1)
	startedSame, _ := os.Stat(filepath.Join(s.Dir, "started.json"))
	if !startedSame.ModTime().Equal(startedBefore.ModTime()) {
		t.Fatal("restart for the running config version restarted the agent")
	}
	f.version.Store(2)
	restart("p4", 2)
	runtimetest.Eventually(t, 10*time.Second, "agent restarted on version 2", func() bool {
		fi, err := os.Stat(filepath.Join(s.Dir, "started.json"))
		return err == nil && fi.ModTime().After(startedBefore.ModTime())
	})
	if s.version.Load() != 2 {
		t.Fatalf("running version %d", s.version.Load())
	}

	// Reconcile releases only the session the server says is gone.
	if err := m.Apply(ctx, &guardv1.Push{Id: "p5", SessionId: "gone", AgentGroupId: "g1", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		t.Fatal(err)
	}
	gone := m.Get("gone")
	m.Reconcile(ctx)
	if m.Get("gone") != nil || running(rt, "gone") {
		t.Fatal("moved session not released")
	}
	if _, err := os.Stat(gone.Socket); !os.IsNotExist(err) {
		t.Fatalf("released session's socket still there: %v", err)
	}
	if m.Get("s1") == nil || !running(rt, "s1") {
		t.Fatal("reconcile released a session still hosted here")
	}
}

func TestIdleAgentsStopAndAPushWakesThem(t *testing.T) {
	m, _, rt := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := m.Ensure("s1", "g1")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Wake(ctx, s); err != nil {
		t.Fatal(err)
	}
	go m.IdleLoop(ctx, 200*time.Millisecond, 20*time.Millisecond)
	runtimetest.Eventually(t, 10*time.Second, "idle agent stopped", func() bool { return !running(rt, "s1") })
	if m.Get("s1") == nil {
		t.Fatal("an idle stop forgot the session")
	}
	if err := m.Apply(ctx, &guardv1.Push{Id: "p1", SessionId: "s1", AgentGroupId: "g1", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		t.Fatal(err)
	}
	if !running(rt, "s1") {
		t.Fatal("push did not wake the idle session")
	}
}
