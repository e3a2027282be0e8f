package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Report is what the sleeper writes to started.json.
type Report struct {
	UID      int               `json:"uid"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Packages string            `json:"packages"`
	Gateway  string            `json:"gateway"`
	RootRW   bool              `json:"root_writable"`
	Cwd      string            `json:"cwd"`
}

// ReadReport waits for the sleeper's report in a session directory.
func ReadReport(t testing.TB, sessionDir string) Report {
	t.Helper()
	var rep Report
	b := ReadFileEventually(t, 20*time.Second, filepath.Join(sessionDir, "started.json"))
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("started.json: %v: %s", err, b)
	}
	return rep
}

// Target is one runtime implementation under the shared suite.
type Target struct {
	// New returns a fresh runtime; the caller cleans it up.
	New func(t *testing.T) rt.Runtime
	// Image runs the sleeper (an image ref or the binary's path).
	Image string
	// AgentView is where the agent sees its workspace and gateway socket.
	AgentView func(spec rt.SessionSpec) (workspace, socket string)
}

// RunSuite checks the behaviour every runtime promises through the
// interface; implementation details (isolation, images) are tested beside
// each implementation.
func RunSuite(t *testing.T, target Target) {
	t.Run("StartReuseStop", func(t *testing.T) { testStartReuseStop(t, target) })
	t.Run("Restart", func(t *testing.T) { testRestart(t, target) })
	t.Run("ExitedAgentStartsAfresh", func(t *testing.T) { testExitedAgentStartsAfresh(t, target) })
	t.Run("StopIdle", func(t *testing.T) { testStopIdle(t, target) })
	t.Run("RefusesBadSpecs", func(t *testing.T) { testRefusesBadSpecs(t, target) })
}

// Spec is a session of the sleeper under root (made before the runtime, so
// that the runtime's cleanup, stopping agents, runs before the dirs are
// removed), its only endpoint the gateway stand-in gw.
func (target Target) Spec(root string, gw *Gateway, session string, args ...string) rt.SessionSpec {
	return rt.SessionSpec{
		SessionID: session, AgentGroupID: "grp1", Image: target.Image, Command: args,
		Env:        map[string]string{"EXTRA": "x=y"},
		SessionDir: filepath.Join(root, session), Endpoints: []rt.Endpoint{GatewayEndpoint(gw.Path)},
	}
}

// GatewayEndpoint is the agent gateway's endpoint at host path socket, as
// the sessions package declares it.
func GatewayEndpoint(socket string) rt.Endpoint {
	return rt.Endpoint{Name: "gateway", HostSocket: socket, ContainerSocket: rt.ContainerGatewaySocket,
		ContainerEnv: map[string]string{rt.EnvGatewaySocket: rt.ContainerGatewaySocket},
		HostEnv:      map[string]string{rt.EnvGatewaySocket: socket}}
}

func testStartReuseStop(t *testing.T, target Target) {
	ctx := context.Background()
	root, gw := t.TempDir(), NewGateway(t)
	r := target.New(t)
	s := target.Spec(root, gw, "s1", "arg1")
	first, err := r.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if first.Reused || first.ID == "" || first.SessionID != "s1" {
		t.Errorf("first start = %+v", first)
	}
	rep := ReadReport(t, s.SessionDir)
	ws, sock := target.AgentView(s)
	want := map[string]string{rt.EnvGatewaySocket: sock, rt.EnvWorkspace: ws,
		rt.EnvSessionID: "s1", rt.EnvGroupID: "grp1", "EXTRA": "x=y"}
	for k, v := range want {
		if rep.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, rep.Env[k], v)
		}
	}
	if rep.Cwd != ws || !slices.Equal(rep.Args, []string{"arg1"}) || rep.Gateway != "ok" {
		t.Errorf("cwd %q args %v gateway %q", rep.Cwd, rep.Args, rep.Gateway)
	}
	Eventually(t, 5*time.Second, "hello on the gateway", func() bool { return slices.Contains(gw.Lines(), "hello s1") })

	again, err := r.Start(ctx, s)
	if err != nil || !again.Reused || again.ID != first.ID {
		t.Errorf("second start = %+v, %v; want reuse of %s", again, err, first.ID)
	}
	checkConcurrentStartsShare(t, r, s, first.ID)
	if running, err := r.Running(ctx); err != nil || !slices.Equal(running, []string{"s1"}) {
		t.Errorf("Running = %v, %v", running, err)
	}

	if err := r.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.SessionDir, "stopped")); err != nil {
		t.Errorf("agent was not stopped with SIGTERM first: %v", err)
	}
	if running, _ := r.Running(ctx); len(running) != 0 {
		t.Errorf("Running after Stop = %v", running)
	}
	if err := r.Stop(ctx, "s1"); err != nil {
		t.Errorf("stopping a stopped session: %v", err)
	}
	if err := r.Stop(ctx, "never-started"); err != nil {
		t.Errorf("stopping an unknown session: %v", err)
	}
}

// checkConcurrentStartsShare: concurrent pushes to one session share its
// agent (the one started as id).
func checkConcurrentStartsShare(t *testing.T, r rt.Runtime, s rt.SessionSpec, id string) {
	t.Helper()
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h, err := r.Start(context.Background(), s); err == nil {
				ids[i] = h.ID
			}
		}()
	}
	wg.Wait()
	for _, got := range ids {
		if got != id {
			t.Errorf("concurrent starts gave %v, want all %s", ids, id)
			return
		}
	}
}

func testRestart(t *testing.T, target Target) {
	ctx := context.Background()
	root, gw := t.TempDir(), NewGateway(t)
	r := target.New(t)
	s := target.Spec(root, gw, "rs")
	before, err := r.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	ReadReport(t, s.SessionDir)
	if err := os.Remove(filepath.Join(s.SessionDir, "started.json")); err != nil {
		t.Fatal(err)
	}
	s.Command = []string{"restarted"}
	after, err := r.Restart(ctx, s)
	if err != nil || after.Reused || after.ID == before.ID {
		t.Fatalf("Restart = %+v, %v; was %s", after, err, before.ID)
	}
	if rep := ReadReport(t, s.SessionDir); !slices.Equal(rep.Args, []string{"restarted"}) {
		t.Errorf("restarted agent got args %v", rep.Args)
	}
}

func testExitedAgentStartsAfresh(t *testing.T, target Target) {
	ctx := context.Background()
	root, gw := t.TempDir(), NewGateway(t)
	r := target.New(t)
	s := target.Spec(root, gw, "short", "exit")
	first, err := r.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 20*time.Second, "agent exit", func() bool {
		ids, err := r.Running(ctx)
		return err == nil && len(ids) == 0
	})
	second, err := r.Start(ctx, s)
	if err != nil || second.Reused || second.ID == first.ID {
		t.Errorf("start after exit = %+v, %v", second, err)
	}
}

func testStopIdle(t *testing.T, target Target) {
	ctx := context.Background()
	root, gw := t.TempDir(), NewGateway(t)
	r := target.New(t)
	for _, id := range []string{"busy", "quiet"} {
		if _, err := r.Start(ctx, target.Spec(root, gw, id)); err != nil {
			t.Fatal(err)
		}
	}
	never := func(string) time.Time { return time.Time{} }
	if n, err := r.StopIdle(ctx, time.Hour, never); err != nil || n != 0 {
		t.Fatalf("freshly started agents stopped as idle: %d, %v", n, err)
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
		t.Errorf("Running = %v, want [busy]", ids)
	}
	// A push to the stopped session wakes it.
	if h, err := r.Start(ctx, target.Spec(root, gw, "quiet")); err != nil || h.Reused {
		t.Errorf("waking the stopped session: %+v, %v", h, err)
	}
}

func testRefusesBadSpecs(t *testing.T, target Target) {
	ctx := context.Background()
	root, gw := t.TempDir(), NewGateway(t)
	r := target.New(t)
	cases := map[string]func(*rt.SessionSpec){
		"session id":     func(s *rt.SessionSpec) { s.SessionID = "../escape" },
		"cpus":           func(s *rt.SessionSpec) { s.CPUs = "lots" },
		"memory":         func(s *rt.SessionSpec) { s.Memory = "1x" },
		"no endpoint":    func(s *rt.SessionSpec) { s.Endpoints = nil },
		"no socket":      func(s *rt.SessionSpec) { s.Endpoints[0].HostSocket = filepath.Join(t.TempDir(), "missing.sock") },
		"socket is file": func(s *rt.SessionSpec) { s.Endpoints[0].HostSocket = plainFile(t) },
		"a second endpoint without its socket": func(s *rt.SessionSpec) {
			s.Endpoints = append(s.Endpoints, rt.Endpoint{Name: "egress", HostSocket: filepath.Join(t.TempDir(), "egress.sock"),
				ContainerSocket: "/run/clawguard/egress.sock"})
		},
	}
	for name, mutate := range cases {
		s := target.Spec(root, gw, "bad")
		mutate(&s)
		if _, err := r.Start(ctx, s); err == nil {
			t.Errorf("%s: Start accepted %+v", name, s)
		}
	}
	s := target.Spec(root, gw, "bad")
	s.SessionID = "a/b"
	if _, err := r.Start(ctx, s); !errors.Is(err, rt.ErrInvalidSpec) {
		t.Errorf("invalid id error is not ErrInvalidSpec: %v", err)
	}
	if ids, _ := r.Running(ctx); len(ids) != 0 {
		t.Errorf("refused specs left agents running: %v", ids)
	}
}

func plainFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
