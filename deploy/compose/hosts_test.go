package compose

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// hostFiles are the per-host compose files of deploy/THREE-HOSTS.md, with
// the environment each needs.
var hostFiles = map[string][]string{
	"postgres.yml": {"POSTGRES_PASSWORD=pw"},
	"server.yml":   {"CLAWGUARD_DATABASE_URL=postgres://clawguard:pw@db.example:5432/clawguard?sslmode=verify-full"},
	"runner.yml":   {"RUNNER_ID=worker-1", "CLAWGUARD_SERVER=clawguard.example:7443", "RUNNER_GROUPS=research"},
	"bridge.yml":   {"CLAWGUARD_SERVER=clawguard.example:7443"},
}

func composeCmd(t *testing.T) []string {
	t.Helper()
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	t.Fatal("neither docker-compose nor docker compose is installed: it validates the compose files (apt-get install docker-compose)")
	return nil
}

// hostConfig runs `compose config` on one host's file, in a copy of hosts/
// with the secret files it names, and returns the resolved file.
func hostConfig(t *testing.T, file string, env []string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("hosts")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"operator-token", "runner-token", "bridge-token", "telegram-bot-token"} {
		if err := os.WriteFile(filepath.Join(dir, "secrets", s), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := composeCmd(t)
	c := exec.Command(cmd[0], append(cmd[1:], "-f", filepath.Join(dir, file), "config")...)
	c.Dir = dir
	c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	out, err := c.CombinedOutput()
	return string(out), err
}

type hostService struct {
	Command []string `yaml:"command"`
	Volumes []any    `yaml:"volumes"`
	Secrets []any    `yaml:"secrets"`
}

// Issue 33: each host's compose file is valid Compose, refuses to start
// without the settings it cannot guess, and wires TLS the way TLS.md says.
func TestHostFilesValidate(t *testing.T) {
	for file, env := range hostFiles {
		out, err := hostConfig(t, file, env)
		if err != nil {
			t.Errorf("%s: compose config: %v\n%s", file, err, out)
			continue
		}
		var cfg struct {
			Services map[string]hostService `yaml:"services"`
		}
		if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
			t.Fatalf("%s: resolved config: %v\n%s", file, err, out)
		}
		want := map[string][]string{ // service → flag values the file must resolve to
			"server.yml":   {"--tls-client-ca", "/etc/clawguard/tls/ca.crt", "--console-listen", "0.0.0.0:8443"},
			"runner.yml":   {"--server", "clawguard.example:7443", "--id", "worker-1", "--tls-cert", "/etc/clawguard/tls/runner.crt"},
			"bridge.yml":   {"--server", "clawguard.example:7443", "--tls-cert", "/etc/clawguard/tls/bridge.crt"},
			"postgres.yml": nil,
		}[file]
		if len(cfg.Services) != 1 {
			t.Errorf("%s: %d services, want one per file", file, len(cfg.Services))
		}
		for _, s := range cfg.Services {
			for i := 0; i+1 < len(want); i += 2 {
				if flag(s.Command, want[i]) != want[i+1] {
					t.Errorf("%s: %s = %q, want %q (command %v)", file, want[i], flag(s.Command, want[i]), want[i+1], s.Command)
				}
			}
		}
		if len(env) > 0 { // without its environment a file is refused, by name
			name := strings.SplitN(env[0], "=", 2)[0]
			if out, err := hostConfig(t, file, env[1:]); err == nil || !strings.Contains(out, name) {
				t.Errorf("%s without %s: err %v, output %q; want a refusal naming it", file, name, err, out)
			}
		}
	}
}
