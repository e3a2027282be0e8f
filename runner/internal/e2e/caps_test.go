package e2e

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
)

// The seed's CONTAINER_CPU_LIMIT / CONTAINER_MEMORY_LIMIT are host-wide:
// here the runner's --container-cpus / --container-memory cap every agent
// whose group sets no cap of its own, and a group's own value wins, field by
// field. (With neither, no limit is set at all:
// TestInstallPackagesHeldApprovedRebuiltRestarted.)
func TestHostDefaultContainerCapsWithPerGroupOverride(t *testing.T) {
	needDocker(t)
	s := startServer(t)
	ctx := context.Background()
	inherit := s.group(t, "inherit", guardv1.CliScope_CLI_SCOPE_GROUP)
	override := s.group(t, "override", guardv1.CliScope_CLI_SCOPE_GROUP)
	cpuOnly := s.group(t, "cpuonly", guardv1.CliScope_CLI_SCOPE_GROUP)
	for g, caps := range map[string][2]*string{override: {proto.String("1"), proto.String("128m")}, cpuOnly: {proto.String("1.5"), nil}} {
		if _, err := s.op.registry.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, Cpus: caps[0], Memory: caps[1]}); err != nil {
			t.Fatalf("set caps: %v", err)
		}
	}
	t.Cleanup(func() { removeGroupImages(t, inherit, override, cpuOnly) })
	r := s.startRunner(t, runnerOpts{runtime: "docker", groups: []string{inherit, override, cpuOnly},
		containerCPUs: "0.25", containerMemory: "96m"})
	dc := dockerClient(t)
	rt := r.Runtime.(*docker.Runtime)
	for _, tc := range []struct {
		name, group string
		nanoCPUs    int64
		memory      int64
	}{
		{"host defaults", inherit, 250_000_000, 96 << 20},
		{"group caps win", override, 1_000_000_000, 128 << 20},
		{"group cpus, host memory", cpuOnly, 1_500_000_000, 96 << 20},
	} {
		sess := r.session(t, tc.group)
		waitEvent(t, sess, tc.name+": agent started", func(e event) bool { return e.s("type") == "start" })
		c, err := dc.ContainerInspect(ctx, rt.ContainerName(sess.ID))
		if err != nil {
			t.Fatal(err)
		}
		if c.HostConfig.NanoCPUs != tc.nanoCPUs || c.HostConfig.Memory != tc.memory {
			t.Errorf("%s: HostConfig cpus=%d memory=%d, want cpus=%d memory=%d", tc.name,
				c.HostConfig.NanoCPUs, c.HostConfig.Memory, tc.nanoCPUs, tc.memory)
		}
	}
}
