// Package docker holds the images' Dockerfiles; this test builds each one
// FROM scratch around a stub static binary and runs it, so a broken COPY,
// ENTRYPOINT, CMD or USER shows here rather than in a deployment.
package docker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func requireDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err == nil {
		if exec.Command("docker", "version").Run() == nil {
			return
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Docker is required in CI and is not reachable")
	}
	t.Skip("Docker is not reachable")
}

func TestImagesRunTheirStaticBinary(t *testing.T) {
	requireDocker(t)
	bin := t.TempDir() // the build context, like bin/ after `make build`
	for _, name := range []string{"clawguard-server", "clawguard-runner"} {
		run(t, ".", []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(bin, name), "./testdata/stub")
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)

	cases := []struct {
		dockerfile string
		runArgs    []string
		want       string
	}{
		// The server's default command serves on all interfaces, as a non-root user.
		{"server.Dockerfile", nil, "uid=65532 args=serve --listen 0.0.0.0:7443 --metrics-listen 0.0.0.0:9464"},
		{"server.Dockerfile", []string{"migrate"}, "uid=65532 args=migrate"},
		// The runner takes its flags as the command (root for the Docker socket).
		{"runner.Dockerfile", []string{"--id", "runner-a", "--runtime", "docker"}, "uid=0 args=--id runner-a --runtime docker"},
	}
	for _, c := range cases {
		tag := "clawguard-dockerfile-test-" + strings.TrimSuffix(c.dockerfile, ".Dockerfile") + ":" + hex.EncodeToString(suffix)
		dockerfile, _ := filepath.Abs(c.dockerfile)
		run(t, ".", nil, "docker", "build", "-q", "-f", dockerfile, "-t", tag, bin)
		t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
		out := run(t, ".", nil, "docker", append([]string{"run", "--rm", "--network", "none", tag}, c.runArgs...)...)
		if strings.TrimSpace(out) != c.want {
			t.Errorf("%s %v printed %q, want %q", c.dockerfile, c.runArgs, strings.TrimSpace(out), c.want)
		}
	}
}
