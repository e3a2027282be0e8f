package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
	"github.com/clawguard/clawguard/runner/internal/runtime/runtimetest"
)

var (
	sleeperOnce sync.Once
	sleeperPath string
	sleeperErr  error
)

// sleeper builds the test agent once for the package.
func sleeper(t *testing.T) string {
	t.Helper()
	sleeperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cg-sleeper")
		if err != nil {
			sleeperErr = err
			return
		}
		sleeperPath = filepath.Join(dir, "sleeper")
		sleeperErr = runtimetest.BuildSleeperTo(sleeperPath)
	})
	if sleeperErr != nil {
		t.Fatal(sleeperErr)
	}
	return sleeperPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sleeperPath != "" {
		os.RemoveAll(filepath.Dir(sleeperPath))
	}
	os.Exit(code)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newRuntime(t *testing.T, grace time.Duration) (*Runtime, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	r := New(Config{InstallID: "test", StopTimeout: grace, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() {
		ids, _ := r.Running(context.Background())
		for _, id := range ids {
			r.Stop(context.Background(), id)
		}
	})
	return r, logs
}

func spec(t *testing.T, gw *runtimetest.Gateway, session string, args ...string) rt.SessionSpec {
	return rt.SessionSpec{
		SessionID: session, AgentGroupID: "grp1", Image: sleeper(t), Command: args,
		Env: map[string]string{"EXTRA": "x"}, SessionDir: filepath.Join(t.TempDir(), session), GatewaySocket: gw.Path,
	}
}

type report struct {
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Gateway string            `json:"gateway"`
	Cwd     string            `json:"cwd"`
}

func TestStartWarnsRunsAndStopsGracefully(t *testing.T) {
	t.Setenv("HOME", "/root") // must not reach the agent
	r, logs := newRuntime(t, 5*time.Second)
	if !strings.Contains(logs.String(), "NO ISOLATION") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no loud warning at construction: %q", logs.String())
	}
	gw := runtimetest.NewGateway(t)
	s := spec(t, gw, "s1", "arg1")
	ctx := context.Background()

	first, err := r.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(runtimetest.ReadFileEventually(t, 10*time.Second, filepath.Join(s.SessionDir, "started.json")), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"CLAWGUARD_GATEWAY_SOCKET": gw.Path, "CLAWGUARD_WORKSPACE": s.SessionDir,
		"CLAWGUARD_SESSION_ID": "s1", "CLAWGUARD_GROUP_ID": "grp1", "EXTRA": "x"}
	for k, v := range want {
		if rep.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, rep.Env[k], v)
		}
	}
	if _, leaked := rep.Env["HOME"]; leaked {
		t.Error("runner environment leaked into the agent")
	}
	if rep.Cwd != s.SessionDir || !slices.Equal(rep.Args, []string{"arg1"}) || rep.Gateway != "ok" {
		t.Errorf("cwd %q args %v gateway %q", rep.Cwd, rep.Args, rep.Gateway)
	}
	runtimetest.Eventually(t, 5*time.Second, "gateway hello", func() bool { return slices.Contains(gw.Lines(), "hello s1") })

	again, err := r.Start(ctx, s)
	if err != nil || !again.Reused || again.ID != first.ID {
		t.Errorf("second start = %+v, %v; want reuse of pid %s", again, err, first.ID)
	}
	if ids, _ := r.Running(ctx); !slices.Equal(ids, []string{"s1"}) {
		t.Errorf("Running = %v", ids)
	}

	if err := r.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.SessionDir, "stopped")); err != nil {
		t.Errorf("agent did not get SIGTERM: %v", err)
	}
	pid, _ := strconv.Atoi(first.ID)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("agent pid %d still exists: %v", pid, err)
	}
	if ids, _ := r.Running(ctx); len(ids) != 0 {
		t.Errorf("Running after stop = %v", ids)
	}
	if err := r.Stop(ctx, "s1"); err != nil {
		t.Errorf("stopping twice: %v", err)
	}
}

func TestStopKillsAnAgentIgnoringSIGTERM(t *testing.T) {
	grace := 300 * time.Millisecond
	r, _ := newRuntime(t, grace)
	gw := runtimetest.NewGateway(t)
	s := spec(t, gw, "stubborn", "ignore-term")
	h, err := r.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.ReadFileEventually(t, 10*time.Second, filepath.Join(s.SessionDir, "started.json"))
	if ids, _ := r.Running(context.Background()); !slices.Equal(ids, []string{"stubborn"}) {
		t.Fatalf("stubborn agent not running before Stop: %v", ids)
	}
	began := time.Now()
	if err := r.Stop(context.Background(), "stubborn"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < grace || took > grace+5*time.Second {
		t.Errorf("stop took %s with grace %s", took, grace)
	}
	pid, _ := strconv.Atoi(h.ID)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("agent pid %d survived SIGKILL: %v", pid, err)
	}
	if _, err := os.Stat(filepath.Join(s.SessionDir, "stopped")); err == nil {
		t.Error("agent that ignores SIGTERM wrote stopped")
	}
}

func TestExitedAgentIsNotRunningAndRestarts(t *testing.T) {
	r, _ := newRuntime(t, time.Second)
	gw := runtimetest.NewGateway(t)
	s := spec(t, gw, "short")
	s.Image = "/bin/true"
	first, err := r.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 5*time.Second, "agent exit", func() bool {
		ids, _ := r.Running(context.Background())
		return len(ids) == 0
	})
	second, err := r.Start(context.Background(), s)
	if err != nil || second.Reused || second.ID == first.ID {
		t.Errorf("start after exit = %+v, %v", second, err)
	}
}

func TestStopIdleAndRefusals(t *testing.T) {
	r, _ := newRuntime(t, 5*time.Second)
	gw := runtimetest.NewGateway(t)
	ctx := context.Background()
	for _, id := range []string{"busy", "quiet"} {
		if _, err := r.Start(ctx, spec(t, gw, id)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.StopIdle(ctx, time.Hour, func(string) time.Time { return time.Time{} }); err != nil || n != 0 {
		t.Fatalf("fresh agents stopped: %d, %v", n, err)
	}
	lastActive := func(id string) time.Time {
		if id == "busy" {
			return time.Now().Add(time.Minute)
		}
		return time.Time{}
	}
	if n, err := r.StopIdle(ctx, time.Nanosecond, lastActive); err != nil || n != 1 {
		t.Fatalf("StopIdle = %d, %v; want 1", n, err)
	}
	if ids, _ := r.Running(ctx); !slices.Equal(ids, []string{"busy"}) {
		t.Errorf("Running = %v", ids)
	}

	before, _ := r.Start(ctx, spec(t, gw, "busy"))
	after, err := r.Restart(ctx, spec(t, gw, "busy"))
	if err != nil || after.Reused || after.ID == before.ID {
		t.Errorf("Restart = %+v, %v; was pid %s", after, err, before.ID)
	}

	bad := spec(t, gw, "nosock")
	bad.GatewaySocket = filepath.Join(t.TempDir(), "missing.sock")
	if _, err := r.Start(ctx, bad); err == nil {
		t.Error("started without a gateway socket")
	}
	bad = spec(t, gw, "../escape")
	if _, err := r.Start(ctx, bad); !errors.Is(err, rt.ErrInvalidSpec) {
		t.Errorf("bad session id: %v", err)
	}
	if img, err := r.BuildGroupImage(ctx, rt.GroupImageSpec{GroupID: "g", BaseImage: "/bin/agent"}); err != nil || img != "/bin/agent" {
		t.Errorf("BuildGroupImage = %q, %v", img, err)
	}
}
