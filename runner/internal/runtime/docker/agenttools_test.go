package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/image"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// The group image of a base that already carries clawguard-mcp (as every
// base buildbase makes does) builds, with the tools at their paths: the
// tools are one COPY, one layer. (A COPY per tool failed such builds with
// "layer does not exist" under the classic builder on fuse-overlayfs, and
// make run's agents never started.)
func TestGroupImageOnABaseThatCarriesTheTools(t *testing.T) {
	requireDocker(t)
	ctx := context.Background()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := New(ctx, Config{InstallID: "t" + randomID(), Logger: quietLogger(),
		Tools: AgentTools{Init: sleeperBin, MCP: sleeperBin, CABundle: ca}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	base := "clawguard-test-withmcp:" + randomID()
	if err := r.BuildAgentBase(ctx, BaseImage{Agent: sleeperBin, MCP: sleeperBin, Tag: base}); err != nil {
		t.Fatal(err)
	}
	group := "g" + randomID()
	t.Cleanup(func() {
		for _, ref := range []string{"clawguard-agent-" + group + ":1", base} {
			r.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	})
	tag, err := r.BuildGroupImage(ctx, rt.GroupImageSpec{GroupID: group, ConfigVersion: 1, BaseImage: base})
	if err != nil {
		t.Fatalf("group image on a base with clawguard-mcp: %v", err)
	}
	img, err := r.cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if ep := img.Config.Entrypoint; len(ep) == 0 || ep[0] != InitBinaryPath {
		t.Errorf("entrypoint %v, want clawguard-init first", ep)
	}
}
