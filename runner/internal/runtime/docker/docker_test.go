package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/errdefs"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
	"github.com/clawguard/clawguard/runner/internal/runtime/runtimetest"
)

// The sleeper base image is built once for the package.
var (
	baseImage string
	dockerErr error
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := New(ctx, Config{InstallID: "setup", Logger: quietLogger()})
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "docker tests need a daemon under CI: %v\n", err)
			return 1
		}
		dockerErr = err
		return m.Run()
	}
	defer r.Close()
	dir, err := os.MkdirTemp("", "cg-sleeper")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sleeper")
	if err := runtimetest.BuildSleeperTo(bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	baseImage = "clawguard-test-sleeper:" + randomID()
	if err := r.BuildBaseImage(ctx, bin, baseImage); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.cli.ImageRemove(context.Background(), baseImage, image.RemoveOptions{Force: true, PruneChildren: true})
	return m.Run()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func randomID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newRuntime gives each test its own install, and removes whatever the test
// left behind.
func newRuntime(t *testing.T) *Runtime {
	t.Helper()
	if dockerErr != nil {
		t.Skipf("no Docker daemon (set CI=true to make this fail): %v", dockerErr)
	}
	r, err := New(context.Background(), Config{InstallID: "t" + randomID(), StopTimeout: 5 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := r.RemoveOrphans(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		r.Close()
	})
	return r
}

type harness struct {
	gw   *runtimetest.Gateway
	root string
}

func newHarness(t *testing.T) *harness {
	return &harness{gw: runtimetest.NewGateway(t), root: t.TempDir()}
}

func (h *harness) spec(session string) rt.SessionSpec {
	return rt.SessionSpec{
		SessionID:     session,
		AgentGroupID:  "grp1",
		Image:         baseImage,
		Command:       []string{"arg1"},
		Env:           map[string]string{"EXTRA": "x=y"},
		SessionDir:    filepath.Join(h.root, session),
		GatewaySocket: h.gw.Path,
	}
}

type report struct {
	UID      int               `json:"uid"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Packages string            `json:"packages"`
	Gateway  string            `json:"gateway"`
	RootRW   bool              `json:"root_writable"`
	Cwd      string            `json:"cwd"`
}

func readReport(t *testing.T, dir string) report {
	t.Helper()
	var rep report
	b := runtimetest.ReadFileEventually(t, 20*time.Second, filepath.Join(dir, "started.json"))
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("started.json: %v: %s", err, b)
	}
	return rep
}

func TestStartIsLockedDownAndStopIsGraceful(t *testing.T) {
	r := newRuntime(t)
	h := newHarness(t)
	ctx := context.Background()
	spec := h.spec("s1")

	first, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if first.Reused {
		t.Error("first start reported Reused")
	}
	rep := readReport(t, spec.SessionDir)

	if rep.UID != 65534 {
		t.Errorf("agent uid = %d, want 65534", rep.UID)
	}
	if rep.RootRW {
		t.Error("agent could write to its root file system")
	}
	if rep.Gateway != "ok" {
		t.Errorf("agent could not reach the gateway socket: %s", rep.Gateway)
	}
	runtimetest.Eventually(t, 5*time.Second, "gateway hello", func() bool {
		return slices.Contains(h.gw.Lines(), "hello s1")
	})
	wantEnv := map[string]string{
		"CLAWGUARD_GATEWAY_SOCKET": "/run/clawguard/gateway.sock",
		"CLAWGUARD_WORKSPACE":      "/workspace",
		"CLAWGUARD_SESSION_ID":     "s1",
		"CLAWGUARD_GROUP_ID":       "grp1",
		"EXTRA":                    "x=y",
	}
	for k, v := range wantEnv {
		if rep.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, rep.Env[k], v)
		}
	}
	if !slices.Equal(rep.Args, []string{"arg1"}) || rep.Cwd != "/workspace" {
		t.Errorf("args %v cwd %q", rep.Args, rep.Cwd)
	}

	info, err := r.cli.ContainerInspect(ctx, "clawguard-"+r.cfg.InstallID+"-s1")
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) {
		t.Errorf("CapDrop = %v", hc.CapDrop)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("SecurityOpt = %v", hc.SecurityOpt)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != 256 {
		t.Errorf("PidsLimit = %v, want 256", hc.PidsLimit)
	}
	if hc.NanoCPUs != 0 || hc.Memory != 0 || hc.CPUQuota != 0 {
		t.Errorf("limits set without configuration: NanoCpus=%d Memory=%d CpuQuota=%d", hc.NanoCPUs, hc.Memory, hc.CPUQuota)
	}
	if !hc.ReadonlyRootfs || hc.NetworkMode != "none" || hc.Privileged || hc.RestartPolicy.Name != "no" {
		t.Errorf("ReadonlyRootfs=%v NetworkMode=%q Privileged=%v Restart=%q", hc.ReadonlyRootfs, hc.NetworkMode, hc.Privileged, hc.RestartPolicy.Name)
	}
	wantLabels := map[string]string{rt.LabelInstall: r.cfg.InstallID, rt.LabelSession: "s1", rt.LabelGroup: "grp1"}
	for k, v := range wantLabels {
		if info.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, info.Config.Labels[k], v)
		}
	}
	mounts := map[string]string{}
	for _, m := range info.Mounts {
		mounts[m.Destination] = m.Source
	}
	if mounts["/workspace"] != spec.SessionDir || mounts["/run/clawguard/gateway.sock"] != h.gw.Path {
		t.Errorf("mounts = %v", mounts)
	}

	again, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.ID != first.ID {
		t.Errorf("second start = %+v, want reuse of %s", again, first.ID)
	}
	// Concurrent pushes to one session share its container.
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h, err := r.Start(ctx, spec); err == nil {
				ids[i] = h.ID
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != first.ID {
			t.Errorf("concurrent starts gave %v, want all %s", ids, first.ID)
			break
		}
	}
	if running, _ := r.Running(ctx); !slices.Equal(running, []string{"s1"}) {
		t.Errorf("Running = %v", running)
	}

	if err := r.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(spec.SessionDir, "stopped")); err != nil {
		t.Errorf("agent did not get SIGTERM before removal: %v", err)
	}
	if _, err := r.cli.ContainerInspect(ctx, info.ID); !errdefs.IsNotFound(err) {
		t.Errorf("container still there after Stop: %v", err)
	}
	if running, _ := r.Running(ctx); len(running) != 0 {
		t.Errorf("Running after stop = %v", running)
	}
	if err := r.Stop(ctx, "s1"); err != nil {
		t.Errorf("stopping a stopped session: %v", err)
	}
}

func TestLimitsAppearOnlyWhenConfigured(t *testing.T) {
	r := newRuntime(t)
	h := newHarness(t)
	ctx := context.Background()
	spec := h.spec("lim")
	spec.CPUs, spec.Memory, spec.PidsLimit = "0.5", "256m", 64
	if _, err := r.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, err := r.cli.ContainerInspect(ctx, r.ContainerName("lim"))
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	if hc.NanoCPUs != 500_000_000 || hc.Memory != 256<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 64 {
		t.Errorf("NanoCpus=%d Memory=%d PidsLimit=%v", hc.NanoCPUs, hc.Memory, hc.PidsLimit)
	}
}

func TestBadSpecsCreateNoContainer(t *testing.T) {
	r := newRuntime(t)
	h := newHarness(t)
	ctx := context.Background()
	cases := map[string]func(*rt.SessionSpec){
		"cpus":           func(s *rt.SessionSpec) { s.CPUs = "lots" },
		"memory":         func(s *rt.SessionSpec) { s.Memory = "1x" },
		"no socket":      func(s *rt.SessionSpec) { s.GatewaySocket = filepath.Join(h.root, "missing.sock") },
		"socket is file": func(s *rt.SessionSpec) { s.GatewaySocket = writeFile(t, h.root, "plain") },
	}
	for name, mutate := range cases {
		spec := h.spec("bad")
		mutate(&spec)
		if _, err := r.Start(ctx, spec); err == nil {
			t.Errorf("%s: Start accepted %+v", name, spec)
		}
		if _, err := r.cli.ContainerInspect(ctx, r.ContainerName("bad")); !errdefs.IsNotFound(err) {
			t.Errorf("%s: a container exists after a refused start (%v)", name, err)
		}
	}
	_, err := r.Start(ctx, func() rt.SessionSpec { s := h.spec("bad"); s.CPUs = "abc"; return s }())
	if err == nil || !strings.Contains(err.Error(), "cpus") {
		t.Errorf("error does not name the bad limit: %v", err)
	}
}

func writeFile(t *testing.T, dir, name string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRemoveOrphansTakesOnlyThisInstall(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	prev := newRuntime(t)
	other := newRuntime(t)
	for _, s := range []string{"o1", "o2"} {
		if _, err := prev.Start(ctx, h.spec(s)); err != nil {
			t.Fatal(err)
		}
	}
	// A stopped-but-not-removed container is an orphan too.
	if err := prev.cli.ContainerStop(ctx, prev.ContainerName("o2"), container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Start(ctx, h.spec("keep")); err != nil {
		t.Fatal(err)
	}

	// A new runner process for the same install.
	restarted, err := New(ctx, Config{InstallID: prev.cfg.InstallID, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	n, err := restarted.RemoveOrphans(ctx)
	if err != nil || n != 2 {
		t.Fatalf("RemoveOrphans = %d, %v; want 2", n, err)
	}
	left, err := restarted.list(ctx, true)
	if err != nil || len(left) != 0 {
		t.Errorf("containers left for the install: %d (%v)", len(left), err)
	}
	if running, _ := other.Running(ctx); !slices.Equal(running, []string{"keep"}) {
		t.Errorf("another install's container was touched: %v", running)
	}
}

func TestStopIdle(t *testing.T) {
	r := newRuntime(t)
	h := newHarness(t)
	ctx := context.Background()
	for _, s := range []string{"busy", "quiet"} {
		if _, err := r.Start(ctx, h.spec(s)); err != nil {
			t.Fatal(err)
		}
	}
	never := func(string) time.Time { return time.Time{} }
	if n, err := r.StopIdle(ctx, time.Hour, never); err != nil || n != 0 {
		t.Fatalf("fresh containers stopped: %d, %v", n, err)
	}
	lastActive := func(s string) time.Time {
		if s == "busy" {
			return time.Now().Add(time.Minute)
		}
		return time.Time{}
	}
	if n, err := r.StopIdle(ctx, time.Nanosecond, lastActive); err != nil || n != 1 {
		t.Fatalf("StopIdle = %d, %v; want 1", n, err)
	}
	if running, _ := r.Running(ctx); !slices.Equal(running, []string{"busy"}) {
		t.Errorf("Running = %v, want [busy]", running)
	}
	// A push to the stopped session wakes it.
	if hd, err := r.Start(ctx, h.spec("quiet")); err != nil || hd.Reused {
		t.Errorf("waking a stopped session: %+v, %v", hd, err)
	}
}

func TestBuildGroupImageAndRestart(t *testing.T) {
	r := newRuntime(t)
	h := newHarness(t)
	ctx := context.Background()
	group := "g" + randomID()
	gspec := rt.GroupImageSpec{
		GroupID: group, ConfigVersion: 3, BaseImage: baseImage,
		AptPackages: []string{"jq", "curl", "jq"}, NpmPackages: []string{"@scope/tool"},
		MCPServers: []rt.MCPServer{{Name: "fs", Command: "mcp-fs", Args: []string{"--root", "/workspace"}}},
	}
	t.Cleanup(func() {
		r.RemoveOrphans(context.Background()) // containers first, or the images only lose their tags
		for _, v := range []string{"3", "4"} {
			r.cli.ImageRemove(context.Background(), "clawguard-agent-"+group+":"+v, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	})
	start := time.Now()
	tag, err := r.BuildGroupImage(ctx, gspec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("group image built in %s", time.Since(start))
	if tag != "clawguard-agent-"+group+":3" {
		t.Errorf("tag = %q", tag)
	}
	img, err := r.cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	want := NewManifest(gspec)
	if l := img.Config.Labels; l[rt.LabelConfigVersion] != "3" || l[rt.LabelPackagesHash] != want.Hash() || l[rt.LabelGroup] != group {
		t.Errorf("image labels = %v", l)
	}

	// The manifest is really in the image, read by the agent.
	spec := h.spec("pk")
	spec.Image = tag
	first, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var got Manifest
	if err := json.Unmarshal([]byte(readReport(t, spec.SessionDir).Packages), &got); err != nil {
		t.Fatalf("packages manifest in container: %v", err)
	}
	if !slices.Equal(got.Apt, []string{"curl", "jq"}) || !slices.Equal(got.Npm, []string{"@scope/tool"}) ||
		len(got.MCPServers) != 1 || got.MCPServers[0].Command != "mcp-fs" || got.ConfigVersion != 3 {
		t.Errorf("manifest = %+v", got)
	}

	// Same config again: no rebuild.
	if again, err := r.BuildGroupImage(ctx, gspec); err != nil || again != tag {
		t.Fatalf("rebuild = %q, %v", again, err)
	}
	if img2, _ := r.cli.ImageInspect(ctx, tag); img2.ID != img.ID {
		t.Errorf("identical config rebuilt the image")
	}

	// Approved install_packages: new version, rebuilt image, restarted container.
	gspec.ConfigVersion = 4
	gspec.AptPackages = append(gspec.AptPackages, "ripgrep")
	tag4, err := r.BuildGroupImage(ctx, gspec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(spec.SessionDir, "started.json")); err != nil {
		t.Fatal(err)
	}
	spec.Image = tag4
	second, err := r.Restart(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID || second.Reused {
		t.Errorf("restart did not replace the container: %+v", second)
	}
	if err := json.Unmarshal([]byte(readReport(t, spec.SessionDir).Packages), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Apt, "ripgrep") || got.ConfigVersion != 4 {
		t.Errorf("restarted container sees %+v", got)
	}

	for _, bad := range []rt.GroupImageSpec{
		{GroupID: "Upper", ConfigVersion: 1, BaseImage: baseImage},
		{GroupID: "ok", ConfigVersion: 1, BaseImage: "x\nRUN rm -rf /"},
		{GroupID: "ok", ConfigVersion: 1, BaseImage: "clawguard-no-such-image:1"},
	} {
		if tag, err := r.BuildGroupImage(ctx, bad); err == nil {
			t.Errorf("BuildGroupImage(%+v) = %q, want error", bad, tag)
		}
	}
}
