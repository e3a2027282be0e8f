package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
)

func dockerClient(t *testing.T) *client.Client {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestInstallPackagesHeldApprovedRebuiltRestarted: held → approved by the
// owner → replay allowed → config updated → image rebuilt → container
// restarted on it. Also: limits appear in docker inspect only when configured.
func TestInstallPackagesHeldApprovedRebuiltRestarted(t *testing.T) {
	needDocker(t)
	s := startServer(t)
	ctx := context.Background()
	owner := s.owner(t, "telegram:olivia")
	plain := s.group(t, "builder", guardv1.CliScope_CLI_SCOPE_GROUP)
	limited := s.group(t, "limited", guardv1.CliScope_CLI_SCOPE_GROUP)
	if _, err := s.op.registry.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: limited, Cpus: proto.String("0.5"), Memory: proto.String("256m")}); err != nil {
		t.Fatalf("set limits: %v", err)
	}
	t.Cleanup(func() { removeGroupImages(t, plain, limited) })
	r := s.startRunner(t, runnerOpts{runtime: "docker", groups: []string{plain, limited}, script: map[string]any{
		plain: []any{step("install_packages", map[string]any{"apt": []any{"cowsay"}, "reason": "talking cow"})},
	}})
	sp, sl := r.session(t, plain), r.session(t, limited)
	dc := dockerClient(t)
	rt := r.Runtime.(*docker.Runtime)

	// Limits: only where configured.
	waitEvent(t, sl, "limited agent started", func(e event) bool { return e.s("type") == "start" })
	li, err := dc.ContainerInspect(ctx, rt.ContainerName(sl.ID))
	if err != nil {
		t.Fatal(err)
	}
	if li.HostConfig.NanoCPUs != 500_000_000 || li.HostConfig.Memory != 256<<20 {
		t.Fatalf("configured limits not applied: cpus=%d memory=%d", li.HostConfig.NanoCPUs, li.HostConfig.Memory)
	}

	held := waitEvent(t, sp, "HELD notice", notice("HELD"))
	before, err := dc.ContainerInspect(ctx, rt.ContainerName(sp.ID))
	if err != nil {
		t.Fatal(err)
	}
	if before.HostConfig.NanoCPUs != 0 || before.HostConfig.Memory != 0 {
		t.Fatalf("limits set although none configured: cpus=%d memory=%d", before.HostConfig.NanoCPUs, before.HostConfig.Memory)
	}
	if l := before.Config.Labels; l["dev.clawguard.session"] != sp.ID || l["dev.clawguard.install"] != r.Config.ID {
		t.Fatalf("labels %v", l)
	}
	h, err := s.op.approvals.Get(ctx, &guardv1.GetRequest{Id: held.s("hold_id")})
	if err != nil {
		t.Fatal(err)
	}
	if h.GetHold().GetKind() != "install_packages" || h.GetHold().GetDeliveryAction() != "install_packages" ||
		!strings.Contains(h.GetHold().GetQuestion(), "apt: cowsay") {
		t.Fatalf("hold = %v", h.GetHold())
	}

	s.approve(t, held.s("hold_id"), owner)
	waitEvent(t, sp, "APPROVED notice", notice("APPROVED"))
	result := waitEvent(t, sp, "RESULT notice", notice("RESULT"))
	t.Logf("result: %s", result.s("text"))

	cfg, err := s.op.registry.GetGroupConfig(ctx, &guardv1.GetGroupConfigRequest{Group: plain})
	if err != nil {
		t.Fatal(err)
	}
	if !contains(cfg.GetConfig().GetAptPackages(), "cowsay") || cfg.GetConfig().GetVersion() < 2 {
		t.Fatalf("config after approval: %v", cfg.GetConfig())
	}
	tag, _ := docker.GroupImageTag(plain, cfg.GetConfig().GetVersion())
	if _, err := dc.ImageInspect(ctx, tag); err != nil {
		t.Fatalf("rebuilt image %s: %v", tag, err)
	}
	// The restarted container runs the new image and sees the package manifest.
	restarted := waitEvent(t, sp, "restart on the new image", func(e event) bool {
		return e.s("type") == "start" && strings.Contains(e.s("packages"), "cowsay")
	})
	_ = restarted
	after, err := dc.ContainerInspect(ctx, rt.ContainerName(sp.ID))
	if err != nil {
		t.Fatal(err)
	}
	if after.ID == before.ID || after.Config.Image != tag {
		t.Fatalf("container not restarted on %s: before %s after %s (image %s)", tag, before.ID[:12], after.ID[:12], after.Config.Image)
	}
	// The agent did not re-run its script after the restart (no second hold).
	list, err := s.op.approvals.List(ctx, &guardv1.ListRequest{Kind: "install_packages"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetHolds()) != 1 {
		t.Fatalf("want one install_packages hold, got %d", len(list.GetHolds()))
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// removeGroupImages deletes the images the runner built for the groups.
func removeGroupImages(t *testing.T, groups ...string) {
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer dc.Close()
	ctx := context.Background()
	for _, g := range groups {
		imgs, err := dc.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.clawguard.group="+g))})
		if err != nil {
			continue
		}
		for _, im := range imgs {
			if _, err := dc.ImageRemove(ctx, im.ID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
				t.Logf("remove image %s: %v", im.ID, err)
			}
		}
	}
}
