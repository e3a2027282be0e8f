// Package docker holds the images' Dockerfiles; this test builds each one
// FROM scratch around a stub static binary and runs it, so a broken COPY,
// ENTRYPOINT, CMD or USER shows here rather than in a deployment.
package docker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
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
	for _, name := range []string{"clawguard-server", "clawguard-runner", "clawguard-init", "clawguard-mcp", "clawguard-telegram", "clawguard-slack"} {
		run(t, ".", []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(bin, name), "./testdata/stub")
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)

	cases := []struct {
		dockerfile string
		runArgs    []string
		want       string
		buildArgs  []string
		title      string // the OCI title label
	}{
		// The server's default command serves on all interfaces, as a non-root user.
		{"server.Dockerfile", nil, "uid=65532 args=serve --listen 0.0.0.0:7443 --metrics-listen 0.0.0.0:9464", nil, "clawguard-server"},
		{"server.Dockerfile", []string{"migrate"}, "uid=65532 args=migrate", nil, "clawguard-server"},
		// The runner takes its flags as the command (root for the Docker socket).
		{"runner.Dockerfile", []string{"--id", "runner-a", "--runtime", "docker"}, "uid=0 args=--id runner-a --runtime docker", nil, "clawguard-runner"},
		// A bridge image per bridge, from one Dockerfile, as a non-root user.
		{"bridge.Dockerfile", []string{"--server", "guard:7443"}, "uid=65532 args=--server guard:7443", []string{"--build-arg", "BRIDGE=clawguard-telegram"}, "clawguard-telegram"},
		{"bridge.Dockerfile", []string{"--version"}, "uid=65532 args=--version", []string{"--build-arg", "BRIDGE=clawguard-slack"}, "clawguard-slack"},
	}
	for _, c := range cases {
		tag := "clawguard-dockerfile-test-" + c.title + ":" + hex.EncodeToString(suffix)
		dockerfile, _ := filepath.Abs(c.dockerfile)
		run(t, ".", nil, "docker", append(append([]string{"build", "-q", "-f", dockerfile, "-t", tag}, c.buildArgs...), bin)...)
		labels := run(t, ".", nil, "docker", "inspect", "--format", `{{index .Config.Labels "org.opencontainers.image.title"}} {{index .Config.Labels "org.opencontainers.image.licenses"}}`, tag)
		if got := strings.TrimSpace(labels); got != c.title+" Apache-2.0" {
			t.Errorf("%s: OCI title and licenses %q, want %q", c.dockerfile, got, c.title+" Apache-2.0")
		}
		t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
		out := run(t, ".", nil, "docker", append([]string{"run", "--rm", "--network", "none", tag}, c.runArgs...)...)
		if strings.TrimSpace(out) != c.want {
			t.Errorf("%s %v printed %q, want %q", c.dockerfile, c.runArgs, strings.TrimSpace(out), c.want)
		}
	}
}

// Issue 33: the images are FROM scratch, with no CA bundle. An HTTPS sink
// (decision export, webhook) whose certificate chains to a private CA is
// reached once the operator mounts that CA and names it with SSL_CERT_FILE,
// and refused without it; public CAs come compiled in (x509roots/fallback,
// imported by every binary: TestEveryBinaryCarriesFallbackRoots).
func TestScratchImageReachesAnHTTPSSinkThroughAMountedCA(t *testing.T) {
	requireDocker(t)
	sink := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	defer sink.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: sink.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	run(t, ".", []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(bin, "clawguard-server"), "./testdata/httpsprobe")
	suffix := make([]byte, 4)
	rand.Read(suffix)
	tag := "clawguard-dockerfile-test-https:" + hex.EncodeToString(suffix)
	dockerfile, _ := filepath.Abs("server.Dockerfile")
	run(t, ".", nil, "docker", "build", "-q", "-f", dockerfile, "-t", tag, bin)
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })

	// The sink listens on the host's loopback: the container shares it.
	probe := func(extra ...string) string {
		args := append([]string{"run", "--rm", "--network", "host"}, extra...)
		return strings.TrimSpace(run(t, ".", nil, "docker", append(args, tag, sink.URL)...))
	}
	if out := probe(); !strings.Contains(out, "certificate signed by unknown authority") {
		t.Errorf("without the CA: %q, want the unknown authority refused", out)
	}
	if out := probe("-v", caFile+":/etc/clawguard/ca.pem:ro", "-e", "SSL_CERT_FILE=/etc/clawguard/ca.pem"); out != "status: 202" {
		t.Errorf("with the CA mounted: %q, want status: 202", out)
	}
}

// Every binary that may speak TLS to something the operator runs carries
// the compiled-in public roots (a scratch image has no others).
func TestEveryBinaryCarriesFallbackRoots(t *testing.T) {
	for _, main := range []string{
		"../../server/cmd/clawguard-server/main.go",
		"../../runner/cmd/clawguard-runner/main.go",
		"../../cli/cmd/ncl/main.go",
		"../../cli/cmd/clawguard-telegram/main.go",
		"../../cli/cmd/clawguard-slack/main.go",
	} {
		src, err := os.ReadFile(main)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), `_ "golang.org/x/crypto/x509roots/fallback"`) {
			t.Errorf("%s does not import golang.org/x/crypto/x509roots/fallback", main)
		}
	}
}
