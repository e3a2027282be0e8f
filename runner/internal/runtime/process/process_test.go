package process

import (
	"bytes"
	"context"
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
		SessionDir: filepath.Join(t.TempDir(), session), Endpoints: []rt.Endpoint{runtimetest.GatewayEndpoint(gw.Path)},
	}
}

func TestRuntimeSuite(t *testing.T) {
	runtimetest.RunSuite(t, runtimetest.Target{
		New: func(t *testing.T) rt.Runtime {
			r, _ := newRuntime(t, 5*time.Second)
			return r
		},
		Image: sleeper(t),
		AgentView: func(s rt.SessionSpec) (string, string) {
			return s.SessionDir, s.Endpoints[0].HostSocket
		},
	})
}

func TestWarnsLoudlyAndKeepsTheRunnerEnvironment(t *testing.T) {
	t.Setenv("HOME", "/root")
	s := spec(t, runtimetest.NewGateway(t), "env") // dirs before the runtime, so agents stop first
	r, logs := newRuntime(t, 5*time.Second)
	if !strings.Contains(logs.String(), "NO ISOLATION") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no loud warning at construction: %q", logs.String())
	}
	if _, err := r.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if rep := runtimetest.ReadReport(t, s.SessionDir); rep.Env["HOME"] != "" {
		t.Errorf("runner environment leaked into the agent: HOME=%q", rep.Env["HOME"])
	}
}

func TestStopKillsAnAgentIgnoringSIGTERM(t *testing.T) {
	grace := 300 * time.Millisecond
	s := spec(t, runtimetest.NewGateway(t), "stubborn", "ignore-term")
	r, _ := newRuntime(t, grace)
	h, err := r.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.ReadReport(t, s.SessionDir)
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

func TestNoImagesNoOrphans(t *testing.T) {
	r, _ := newRuntime(t, time.Second)
	ctx := context.Background()
	if img, err := r.BuildGroupImage(ctx, rt.GroupImageSpec{GroupID: "g", BaseImage: "/bin/agent"}); err != nil || img != "/bin/agent" {
		t.Errorf("BuildGroupImage = %q, %v", img, err)
	}
	if _, err := r.BuildGroupImage(ctx, rt.GroupImageSpec{GroupID: "g"}); err == nil {
		t.Error("BuildGroupImage without a binary succeeded")
	}
	if n, err := r.RemoveOrphans(ctx); n != 0 || err != nil {
		t.Errorf("RemoveOrphans = %d, %v", n, err)
	}
}
