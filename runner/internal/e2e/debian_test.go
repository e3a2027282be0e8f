package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/stdcopy"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
)

// debianBase finds the Debian image `make debian-image` builds from the
// Debian archive (mmdebstrap, cached in Docker; labelled with its suite),
// which make test builds first. Missing, the test is skipped, and fails
// under CI=true.
func debianBase(t *testing.T) string {
	t.Helper()
	needDocker(t)
	imgs, err := dockerClient(t).ImageList(context.Background(), image.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", "dev.clawguard.debian-suite"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range imgs {
		for _, tag := range im.RepoTags {
			if strings.HasPrefix(tag, "clawguard-debian:") {
				return tag
			}
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no clawguard-debian image (make debian-image builds it)")
	}
	t.Skip("no clawguard-debian image: make debian-image builds it")
	return ""
}

// The seed installs an approved package into the agent's image. On a base
// image with apt the package is installed at image build and usable in the
// restarted container; the build's output reaches the agent; a package that
// does not install fails the build, is reported, and the running container
// is kept.
func TestApprovedAptPackageIsInstalledAndRunsInTheRestartedContainer(t *testing.T) {
	base := debianBase(t)
	ctx := context.Background()
	dc := dockerClient(t)
	// A tag of this run's own: runs on the same daemon must not remove each other's.
	agentImage := fmt.Sprintf("clawguard-agent-demo-debian:e2e-%d", time.Now().UnixNano())
	build, err := docker.New(ctx, docker.Config{InstallID: "e2e-debian-build"})
	if err != nil {
		t.Fatal(err)
	}
	defer build.Close()
	if err := build.BuildAgentBase(ctx, docker.BaseImage{From: base, Agent: demoAgent, MCP: mcpBin, Tag: agentImage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.ImageRemove(context.Background(), agentImage, image.RemoveOptions{Force: true}) })

	s := startServer(t)
	owner := s.owner(t, "telegram:olivia")
	resp, err := s.op.registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "debian", CliScope: guardv1.CliScope_CLI_SCOPE_GROUP, BaseImage: agentImage})
	if err != nil {
		t.Fatal(err)
	}
	g := resp.GetGroup().GetId()
	t.Cleanup(func() { removeGroupImages(t, g) })
	r := s.startRunner(t, runnerOpts{runtime: "docker", groups: []string{g}, script: []any{
		step("install_packages", map[string]any{"apt": []any{"hello"}, "reason": "greet the world"}),
	}})
	sg := r.session(t, g)
	rtm := r.Runtime.(*docker.Runtime)

	held := waitEvent(t, sg, "install_packages held", notice("HELD"))
	before, err := dc.ContainerInspect(ctx, rtm.ContainerName(sg.ID))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := execIn(t, rtm.ContainerName(sg.ID), "hello"); strings.Contains(out, "Hello, world!") {
		t.Fatal("hello runs before it was approved")
	}
	s.approve(t, held.s("hold_id"), owner)

	result := waitEventFor(t, sg, 5*time.Minute, "install_packages result", func(e event) bool {
		return e.s("type") == "notice" && (e.s("kind") == "RESULT" || e.s("kind") == "FAILED") && e.s("hold_id") == held.s("hold_id")
	})
	// The build output's summary ends with the install step's own output,
	// or the builder's "Using cache" when an earlier build made that layer.
	if text := result.s("text"); result.s("kind") != "RESULT" || !strings.Contains(text, "installed apt: hello") ||
		!(strings.Contains(text, "Setting up hello") || strings.Contains(text, "Using cache")) {
		t.Fatalf("result notice = %q, want the install and its build output", result.s("text"))
	}
	after, err := dc.ContainerInspect(ctx, rtm.ContainerName(sg.ID))
	if err != nil {
		t.Fatal(err)
	}
	if after.ID == before.ID {
		t.Fatal("the container was not restarted")
	}
	// The package is really there: it runs inside the restarted container
	// (read-only root, no network, the agent's non-root user).
	out, code := execIn(t, rtm.ContainerName(sg.ID), "hello")
	if code != 0 || !strings.Contains(out, "Hello, world!") {
		t.Fatalf("hello in the restarted container: exit %d, output %q", code, out)
	}
	start := waitEvent(t, sg, "the restarted agent", func(e event) bool {
		return e.s("type") == "start" && strings.Contains(e.s("packages"), "hello")
	})
	var m docker.Manifest
	if err := json.Unmarshal([]byte(start.s("packages")), &m); err != nil || !m.Installed {
		t.Fatalf("manifest %q (%v): want installed", start.s("packages"), err)
	}
	wake := waitEvent(t, sg, "the verify-and-report message", isOnWake)
	if !strings.Contains(wake.s("text"), "Verify they are installed") {
		t.Fatalf("on_wake text on an image that installs = %q, want the verify-and-report words", wake.s("text"))
	}
	log, err := os.ReadFile(sg.Dir + "/.clawguard/build.log")
	if err != nil || !strings.Contains(string(log), "apt-get install -y --no-install-recommends hello") {
		t.Fatalf("build log in the workspace (%v):\n%s", err, log)
	}

	// A package that does not exist: the build fails, the agent is told why
	// (apt's own words), and the running container is kept.
	do(sg, "bad", step("install_packages", map[string]any{"apt": []any{"clawguard-no-such-package"}}))
	badHeld := waitEvent(t, sg, "second install held", func(e event) bool {
		return e.s("type") == "send" && e.s("request_id") == "do-bad" && e.s("status") == "HELD"
	})
	s.approve(t, badHeld.s("hold_id"), owner)
	failed := waitEventFor(t, sg, 5*time.Minute, "failed install reported", func(e event) bool {
		return e.s("type") == "notice" && e.s("kind") == "FAILED" && e.s("hold_id") == badHeld.s("hold_id")
	})
	if !strings.Contains(failed.s("text"), "Unable to locate package clawguard-no-such-package") ||
		!strings.Contains(failed.s("text"), "running container was kept") {
		t.Fatalf("failed notice = %q", failed.s("text"))
	}
	kept, err := dc.ContainerInspect(ctx, rtm.ContainerName(sg.ID))
	if err != nil || kept.ID != after.ID || !kept.State.Running {
		t.Fatalf("after the failed build: container %v (%v), want %s still running", kept.ID, err, after.ID[:12])
	}
	if out, code := execIn(t, rtm.ContainerName(sg.ID), "hello"); code != 0 || !strings.Contains(out, "Hello, world!") {
		t.Fatalf("hello after the failed build: exit %d, %q", code, out)
	}
}

// execIn runs cmd in a container and returns its output and exit code.
func execIn(t *testing.T, name string, cmd ...string) (string, int) {
	t.Helper()
	ctx := context.Background()
	dc := dockerClient(t)
	ex, err := dc.ContainerExecCreate(ctx, name, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec %v in %s: %v", cmd, name, err)
	}
	att, err := dc.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec attach: %v", err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatalf("exec output: %v", err)
	}
	st, err := dc.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), st.ExitCode
}
