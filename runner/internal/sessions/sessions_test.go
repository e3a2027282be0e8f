package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	"github.com/clawguard/clawguard/runner/internal/handlers"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
	"github.com/clawguard/clawguard/runner/internal/runtime/process"
	"github.com/clawguard/clawguard/runner/internal/runtime/runtimetest"
)

// fakeRegistry plays a server hosting groups with cli_scope = disabled: the
// agent's GetGroup is refused, the runner's GetSessionConfig answers.
// Session "gone" was moved to another runner.
type fakeRegistry struct {
	guardv1.UnimplementedRegistryServer
	version       atomic.Int64
	asserted      atomic.Value // the x-clawguard-session header of the last config read
	getGroupCalls atomic.Int64
	configReads   atomic.Int64
}

func (f *fakeRegistry) GetGroup(context.Context, *guardv1.GetGroupRequest) (*guardv1.GetGroupResponse, error) {
	f.getGroupCalls.Add(1)
	return nil, status.Error(codes.PermissionDenied, "CLI access is disabled for this agent group.")
}

func (f *fakeRegistry) GetSessionConfig(ctx context.Context, req *guardv1.GetSessionConfigRequest) (*guardv1.GetSessionConfigResponse, error) {
	f.configReads.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	f.asserted.Store(strings.Join(md.Get(handlers.SessionHeader), ","))
	if req.GetSessionId() == "gone" {
		return nil, status.Errorf(codes.PermissionDenied, "session %q is not hosted by runner %q", req.GetSessionId(), "r1")
	}
	return &guardv1.GetSessionConfigResponse{
		Session: &guardv1.Session{Id: req.GetSessionId(), AgentGroupId: "g1"},
		Group:   &guardv1.Group{Id: "g1", Config: f.config()},
	}, nil
}

func (f *fakeRegistry) config() *guardv1.GroupConfig {
	return &guardv1.GroupConfig{
		CliScope: guardv1.CliScope_CLI_SCOPE_DISABLED, Cpus: "0.5", Memory: "256m", Version: f.version.Load(),
		AptPackages: []string{"jq"}, McpServers: []*guardv1.McpServer{{Name: "fs", Command: "mcp-fs", Env: map[string]string{"TOKEN": "mcp-secret"}}},
	}
}

// recordingRuntime is the process runtime, remembering what it was asked for.
type recordingRuntime struct {
	*process.Runtime
	mu        sync.Mutex
	images    []rt.GroupImageSpec
	specs     []rt.SessionSpec
	failBuild atomic.Bool // image builds fail (a package that does not install)
}

func (r *recordingRuntime) BuildGroupImage(ctx context.Context, spec rt.GroupImageSpec) (string, error) {
	r.mu.Lock()
	r.images = append(r.images, spec)
	r.mu.Unlock()
	if r.failBuild.Load() {
		if spec.Output != nil {
			io.WriteString(spec.Output, "E: Unable to locate package nope\n")
		}
		return "", errors.New("build: apt-get install returned 100")
	}
	return r.Runtime.BuildGroupImage(ctx, spec)
}

func (r *recordingRuntime) Start(ctx context.Context, spec rt.SessionSpec) (rt.Handle, error) {
	r.mu.Lock()
	r.specs = append(r.specs, spec)
	r.mu.Unlock()
	return r.Runtime.Start(ctx, spec)
}

func (r *recordingRuntime) Restart(ctx context.Context, spec rt.SessionSpec) (rt.Handle, error) {
	r.mu.Lock()
	r.specs = append(r.specs, spec)
	r.mu.Unlock()
	return r.Runtime.Restart(ctx, spec)
}

// last is the last session spec and image spec asked for.
func (r *recordingRuntime) last(t *testing.T) (rt.SessionSpec, rt.GroupImageSpec) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.specs) == 0 || len(r.images) == 0 {
		t.Fatal("nothing started")
	}
	return r.specs[len(r.specs)-1], r.images[len(r.images)-1]
}

// checkLimits fails unless the last start carried the group's config.
func checkLimits(t *testing.T, r *recordingRuntime, session string, version int64) {
	t.Helper()
	spec, img := r.last(t)
	if spec.SessionID != session || spec.CPUs != "0.5" || spec.Memory != "256m" {
		t.Fatalf("spec of %s: cpus %q memory %q, want 0.5 and 256m (session %s)", spec.SessionID, spec.CPUs, spec.Memory, session)
	}
	if img.ConfigVersion != version || len(img.AptPackages) != 1 || img.AptPackages[0] != "jq" {
		t.Fatalf("image spec %+v, want version %d with apt jq", img, version)
	}
	// The group's MCP server is hosted by the runner: neither its command
	// nor its secret is in what the container is built or started from.
	for _, what := range []string{fmt.Sprintf("%+v", img), fmt.Sprintf("%+v", spec)} {
		if strings.Contains(what, "mcp-fs") || strings.Contains(what, "mcp-secret") {
			t.Fatalf("the agent's container config carries the MCP server: %s", what)
		}
	}
}

func newManager(t *testing.T) (*Manager, *fakeRegistry, *recordingRuntime) {
	t.Helper()
	return newManagerWith(t, &fakeRegistry{}, &delivery.Engine{Registry: delivery.NewRegistry(nil)})
}

// newManagerWith serves f and runs sessions with engine (its Notifier is the manager).
func newManagerWith(t *testing.T, f *fakeRegistry, engine *delivery.Engine) (*Manager, *fakeRegistry, *recordingRuntime) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	rt := &recordingRuntime{Runtime: process.New(process.Config{InstallID: "t", StopTimeout: time.Second})}
	m := New(Config{
		DataDir: dir, Runtime: rt, AgentBase: runtimetest.BuildSleeper(t), Conn: conn,
		Engine:  engine,
		Gateway: gateway.Options{Known: func(string) bool { return false }},
	})
	engine.Notifier = m
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m, f, rt
}

func running(r rt.Runtime, id string) bool {
	ids, _ := r.Running(context.Background())
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
	// The config was the runner's own read (no agent session asserted), and
	// the agent's GetGroup, refused for cli_scope = disabled, was not needed.
	if got, ok := f.asserted.Load().(string); !ok || got != "" {
		t.Fatalf("group config read asserting session %q (read at all: %v), want the runner's own read", got, ok)
	}
	if n := f.getGroupCalls.Load(); n != 0 {
		t.Fatalf("GetGroup called %d times", n)
	}
	checkLimits(t, rt, "s1", 1)
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
	checkLimits(t, rt, "s1", 2)

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

// Open starts the agent on the group's config as GetSessionConfig answers
// it — the one answer carrying the MCP servers' environment (OpenSession's
// is redacted, issue 41) — and only that config is handed on to host them.
func TestOpenStartsWithTheRunnersOwnConfigRead(t *testing.T) {
	m, f, rt := newManager(t)
	var hosted atomic.Value
	m.cfg.OnGroup = func(g *guardv1.Group) { hosted.Store(g.GetConfig().GetMcpServers()[0].GetEnv()["TOKEN"]) }
	ctx := context.Background()
	opened := &guardv1.Group{Id: "g1", Config: f.config()}
	opened.Config.McpServers[0].Env["TOKEN"] = "<redacted>"
	s, err := m.Open(ctx, &guardv1.Session{Id: "s2", AgentGroupId: "g1"}, opened)
	if err != nil {
		t.Fatal(err)
	}
	if !running(rt, "s2") {
		t.Fatal("opened session not started")
	}
	if got, read := f.asserted.Load().(string); !read || got != "" {
		t.Fatalf("Open's config read asserted %q (read: %v): want the runner's own GetSessionConfig", got, read)
	}
	if got := hosted.Load(); got != "mcp-secret" {
		t.Fatalf("the MCP servers were handed env TOKEN=%v: want GetSessionConfig's value, never OpenSession's redacted one", got)
	}
	checkLimits(t, rt, "s2", 1)

	f.version.Store(5)
	if err := m.Restart(ctx, s); err != nil {
		t.Fatal(err)
	}
	checkLimits(t, rt, "s2", 5)
}

// A group image that does not build (an approved package that fails to
// install) keeps the running agent: the handler's restart reports the
// failure with the build output, the group's restart push is acknowledged
// instead of rebuilding the same failure again and again, and a later start
// uses the last image that built.
func TestAFailedBuildKeepsTheRunningAgent(t *testing.T) {
	m, f, rtm := newManager(t)
	ctx := context.Background()
	if err := m.Apply(ctx, &guardv1.Push{Id: "p1", SessionId: "s1", AgentGroupId: "g1", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		t.Fatal(err)
	}
	s := m.Get("s1")
	runtimetest.ReadReport(t, s.Dir)
	first, _ := os.Stat(filepath.Join(s.Dir, "started.json"))

	rtm.failBuild.Store(true)
	f.version.Store(2)
	build, err := m.RestartSession(ctx, delivery.Session{ID: "s1", GroupID: "g1"}, true)
	if !errors.Is(err, ErrImageBuild) || !strings.Contains(build, "Unable to locate package nope") {
		t.Fatalf("restart with a failing build: %v, output %q", err, build)
	}
	if log, err := os.ReadFile(filepath.Join(s.Dir, rt.BuildLogFile)); err != nil || !strings.Contains(string(log), "Unable to locate package") {
		t.Fatalf("build log for the agent: %q (%v)", log, err)
	}
	if err := m.Apply(ctx, &guardv1.Push{Id: "p2", SessionId: "s1", AgentGroupId: "g1",
		Body: &guardv1.Push_Restart{Restart: &guardv1.RestartContainer{RebuildImage: true, ConfigVersion: 2}}}); err != nil {
		t.Fatalf("restart push with a failing build: %v, want it applied (the agent kept)", err)
	}
	now, _ := os.Stat(filepath.Join(s.Dir, "started.json"))
	if !running(rtm, "s1") || !now.ModTime().Equal(first.ModTime()) || s.version.Load() != 1 {
		t.Fatalf("agent after the failed builds: running=%v restarted=%v version=%d", running(rtm, "s1"), !now.ModTime().Equal(first.ModTime()), s.version.Load())
	}

	// Stopped (idle) while the config still does not build: a push starts it
	// on the last image that did.
	if err := rtm.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, &guardv1.Push{Id: "p3", SessionId: "s1", AgentGroupId: "g1", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		t.Fatalf("start with a failing build: %v", err)
	}
	if !running(rtm, "s1") {
		t.Fatal("agent not started on its last image")
	}
}

// Issue 32: a stop push (a freeze) stops the agent and keeps it stopped —
// a delivery is kept in the inbox without starting it, a restart or a
// stalled inbox does not start it, and neither does a runner restart (the
// marker is on disk) — until a start push (the unfreeze) thaws it.
func TestAFrozenSessionStaysStoppedUntilStarted(t *testing.T) {
	m, _, rt := newManager(t)
	ctx := context.Background()
	apply := func(id string, body *guardv1.Push) {
		t.Helper()
		body.Id, body.SessionId, body.AgentGroupId = id, "s1", "g1"
		if err := m.Apply(ctx, body); err != nil {
			t.Fatalf("push %s: %v", id, err)
		}
	}
	apply("p1", &guardv1.Push{Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}})
	if !running(rt, "s1") {
		t.Fatal("not started")
	}
	apply("p2", &guardv1.Push{Body: &guardv1.Push_Stop{Stop: &guardv1.StopSession{Reason: "frozen by operator: incident"}}})
	if running(rt, "s1") {
		t.Fatal("a stop push left the agent running")
	}
	apply("p3", &guardv1.Push{Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{MessageId: "m1", Text: "while frozen"}}})
	apply("p4", &guardv1.Push{Body: &guardv1.Push_Restart{Restart: &guardv1.RestartContainer{}}})
	s := m.Get("s1")
	if running(rt, "s1") || s.Inbox.Len() != 1 {
		t.Fatalf("frozen: running=%v inbox=%d, want stopped with the message kept", running(rt, "s1"), s.Inbox.Len())
	}
	if err := m.Wake(ctx, s); !errors.Is(err, ErrFrozen) {
		t.Fatalf("wake of a frozen session: %v, want ErrFrozen", err)
	}
	if n := m.restartStalled(ctx, time.Now().Add(24*time.Hour)); n != 0 || running(rt, "s1") {
		t.Fatal("the ack deadline restarted a frozen agent")
	}
	// A runner restart: a new manager on the same data dir reads the marker.
	again := New(m.cfg)
	s2, err := again.Ensure("s1", "g1")
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Wake(ctx, s2); !errors.Is(err, ErrFrozen) {
		t.Fatalf("after a runner restart the frozen session woke: %v", err)
	}
	// The unfreeze's start push, to the restarted runner.
	if err := again.Apply(ctx, &guardv1.Push{Id: "p5", SessionId: "s1", AgentGroupId: "g1", Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
		t.Fatal(err)
	}
	if !running(rt, "s1") || s2.Inbox.Len() != 1 {
		t.Fatalf("the start push (unfreeze): running=%v inbox=%d, want started with the kept message", running(rt, "s1"), s2.Inbox.Len())
	}
}

// Issue 42: every push woke the session by reading its group's config
// again. The config is read when it changes — the server pushes a restart
// then — and when none was read yet: a push to a running agent, or one
// that starts a stopped one, uses the config last read.
func TestTheGroupConfigIsReadWhenItChanges(t *testing.T) {
	m, f, rt := newManager(t)
	ctx := context.Background()
	push := func(id string, body *guardv1.Push) {
		t.Helper()
		body.Id, body.SessionId, body.AgentGroupId = id, "s1", "g1"
		if err := m.Apply(ctx, body); err != nil {
			t.Fatalf("push %s: %v", id, err)
		}
	}
	push("p1", &guardv1.Push{Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{MessageId: "m1", Text: "hi"}}})
	if n := f.configReads.Load(); n != 1 {
		t.Fatalf("config read %d times to start the agent, want 1", n)
	}
	push("p2", &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{Kind: guardv1.NoticeKind_NOTICE_KIND_INFO, Text: "x"}}})
	if err := rt.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	push("p3", &guardv1.Push{Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{MessageId: "m2", Text: "wake up"}}})
	if n := f.configReads.Load(); n != 1 || !running(rt, "s1") {
		t.Fatalf("after a push to the running agent and one that started it again: %d config reads (running=%v), want still 1", n, running(rt, "s1"))
	}
	checkLimits(t, rt, "s1", 1)
	f.version.Store(2)
	push("p4", &guardv1.Push{Body: &guardv1.Push_Restart{Restart: &guardv1.RestartContainer{RebuildImage: true, ConfigVersion: 2}}})
	if n := f.configReads.Load(); n != 2 {
		t.Fatalf("a config change read it %d times in all, want 2", n)
	}
	checkLimits(t, rt, "s1", 2)
}
