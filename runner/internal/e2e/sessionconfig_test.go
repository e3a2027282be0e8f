package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/handlers"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
)

// TestDisabledCliScopeGroupGetsItsConfig: the agent of a cli_scope=disabled
// group may not read its group, yet its container starts with the configured
// limits, packages and MCP servers (the runner reads them as itself, via
// OpenSession and GetSessionConfig), and a config change restarts it on the
// new limits.
func TestDisabledCliScopeGroupGetsItsConfig(t *testing.T) {
	needDocker(t)
	s := startServer(t)
	ctx := context.Background()
	g := s.group(t, "locked", guardv1.CliScope_CLI_SCOPE_DISABLED)
	if _, err := s.op.registry.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, Cpus: proto.String("0.5"), Memory: proto.String("256m")}); err != nil {
		t.Fatalf("set limits: %v", err)
	}
	if _, err := s.op.registry.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: g, Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Packages: []string{"jq"}}); err != nil {
		t.Fatalf("add package: %v", err)
	}
	if _, err := s.op.registry.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: g, Server: &guardv1.McpServer{Name: "fs", Command: "mcp-fs"}}); err != nil {
		t.Fatalf("add MCP server: %v", err)
	}
	t.Cleanup(func() { removeGroupImages(t, g) })
	r := s.startRunner(t, runnerOpts{runtime: "docker", groups: []string{g}})
	sl := r.session(t, g)
	dc := dockerClient(t)
	rt := r.Runtime.(*docker.Runtime)

	start := waitEvent(t, sl, "agent started", func(e event) bool { return e.s("type") == "start" })
	// The MCP server is the runner's to host: the container's manifest
	// names the packages and not the server's command.
	if p := start.s("packages"); !strings.Contains(p, `"jq"`) || strings.Contains(p, "mcp-fs") {
		t.Fatalf("packages manifest in the container = %s, want apt jq and no MCP server", p)
	}
	ci, err := dc.ContainerInspect(ctx, rt.ContainerName(sl.ID))
	if err != nil {
		t.Fatal(err)
	}
	if ci.HostConfig.NanoCPUs != 500_000_000 || ci.HostConfig.Memory != 256<<20 {
		t.Fatalf("configured limits not applied: cpus=%d memory=%d", ci.HostConfig.NanoCPUs, ci.HostConfig.Memory)
	}

	// The premise: the agent itself may not read its group.
	asAgent := guardv1.NewRegistryClient(r.Conn)
	if _, err := asAgent.GetGroup(metadata.AppendToOutgoingContext(ctx, handlers.SessionHeader, sl.ID), &guardv1.GetGroupRequest{Id: g}); err == nil {
		t.Fatal("the agent of a cli_scope=disabled group read its group; the test's premise is gone")
	}

	// A config change pushes a restart; the runner re-reads the config as itself.
	if _, err := s.op.registry.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: g, Memory: proto.String("512m")}); err != nil {
		t.Fatalf("raise memory: %v", err)
	}
	waitFor(t, 60*time.Second, "container restarted with 512m", func() bool {
		ci, err := dc.ContainerInspect(ctx, rt.ContainerName(sl.ID))
		return err == nil && ci.HostConfig.Memory == 512<<20 && ci.HostConfig.NanoCPUs == 500_000_000
	})
}
