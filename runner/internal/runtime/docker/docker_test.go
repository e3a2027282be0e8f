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
	baseImage  string
	sleeperBin string // a static binary: the test images' agent, and a stand-in for the tools
	dockerErr  error
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
	sleeperBin = bin
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

// requireDocker skips outside CI when no daemon is reachable (under CI,
// TestMain already failed the package).
func requireDocker(t *testing.T) {
	t.Helper()
	if dockerErr != nil {
		t.Skipf("no Docker daemon (set CI=true to make this fail): %v", dockerErr)
	}
}

// newRuntime gives each test its own install, and removes whatever the test
// left behind.
func newRuntime(t *testing.T) *Runtime {
	t.Helper()
	requireDocker(t)
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
		SessionID:    session,
		AgentGroupID: "grp1",
		Image:        baseImage,
		Command:      []string{"arg1"},
		Env:          map[string]string{"EXTRA": "x=y"},
		SessionDir:   filepath.Join(h.root, session),
		Endpoints:    []rt.Endpoint{runtimetest.GatewayEndpoint(h.gw.Path)},
	}
}

func readReport(t *testing.T, dir string) runtimetest.Report { return runtimetest.ReadReport(t, dir) }

func TestRuntimeSuite(t *testing.T) {
	requireDocker(t)
	runtimetest.RunSuite(t, runtimetest.Target{
		New:   func(t *testing.T) rt.Runtime { return newRuntime(t) },
		Image: baseImage,
		AgentView: func(rt.SessionSpec) (string, string) {
			return rt.ContainerWorkspace, rt.ContainerGatewaySocket
		},
	})
}

func TestContainerIsLockedDown(t *testing.T) {
	h := newHarness(t) // before the runtime: its cleanup must run after the containers are gone
	r := newRuntime(t)
	ctx := context.Background()
	spec := h.spec("s1")
	if _, err := r.Start(ctx, spec); err != nil {
		t.Fatal(err)
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
	if info.Config.User != "65534:65534" {
		t.Errorf("User = %q", info.Config.User)
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

	if err := r.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.ContainerInspect(ctx, info.ID); !errdefs.IsNotFound(err) {
		t.Errorf("container still there after Stop: %v", err)
	}
}

func TestLimitsAppearOnlyWhenConfigured(t *testing.T) {
	h := newHarness(t) // before the runtime: its cleanup must run after the containers are gone
	r := newRuntime(t)
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
	h := newHarness(t) // before the runtime: its cleanup must run after the containers are gone
	r := newRuntime(t)
	ctx := context.Background()
	cases := map[string]func(*rt.SessionSpec){
		"cpus":      func(s *rt.SessionSpec) { s.CPUs = "lots" },
		"memory":    func(s *rt.SessionSpec) { s.Memory = "1x" },
		"no socket": func(s *rt.SessionSpec) { s.Endpoints[0].HostSocket = filepath.Join(h.root, "missing.sock") },
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

func TestBuildGroupImageAndRestart(t *testing.T) {
	h := newHarness(t) // before the runtime: its cleanup must run after the containers are gone
	r := newRuntime(t)
	ctx := context.Background()
	group := "g" + randomID()
	gspec := rt.GroupImageSpec{
		GroupID: group, ConfigVersion: 3, BaseImage: baseImage,
		AptPackages: []string{"jq", "curl", "jq"}, NpmPackages: []string{"@scope/tool"},
	}
	t.Cleanup(func() {
		r.RemoveOrphans(context.Background()) // containers first, or the images only lose their tags
		for _, v := range []string{"3", "4", "5"} {
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
		got.ConfigVersion != 3 {
		t.Errorf("manifest = %+v", got)
	}
	// A FROM scratch base has no package manager: recorded only, offline.
	if got.Installed {
		t.Errorf("packages marked installed on a scratch base: %+v", got)
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
	// Building version 4 kept version 3: its container was still running.
	if _, err := r.cli.ImageInspect(ctx, tag); err != nil {
		t.Errorf("version 3, in use while 4 was built, was removed: %v", err)
	}
	// The next version removes 3 (no container uses it now) and keeps 4,
	// which the restarted container runs.
	gspec.ConfigVersion = 5
	gspec.NpmPackages = nil
	tag5, err := r.BuildGroupImage(ctx, gspec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.ImageInspect(ctx, tag); !errdefs.IsNotFound(err) {
		t.Errorf("old version 3 still there after version 5 was built: %v", err)
	}
	for _, keep := range []string{tag4, tag5} {
		if _, err := r.cli.ImageInspect(ctx, keep); err != nil {
			t.Errorf("%s (in use, or the newest) removed: %v", keep, err)
		}
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

func TestBaseImageNeedsAStaticBinary(t *testing.T) {
	r := newRuntime(t)
	for _, bin := range []string{"/etc/passwd", "/bin/ls"} { // not ELF; dynamically linked
		if err := r.BuildBaseImage(context.Background(), bin, "clawguard-test-never:1"); err == nil {
			t.Errorf("BuildBaseImage(%s) succeeded", bin)
			r.cli.ImageRemove(context.Background(), "clawguard-test-never:1", image.RemoveOptions{Force: true})
		}
	}
}

func TestNewRefusesRootOrBadConfig(t *testing.T) {
	requireDocker(t)
	for _, cfg := range []Config{
		{InstallID: "ok", User: "0"},
		{InstallID: "ok", User: "0:0"},
		{InstallID: "ok", User: "root"},
		{InstallID: "bad/install"},
		{InstallID: ""},
	} {
		if r, err := New(context.Background(), cfg); err == nil {
			r.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}
