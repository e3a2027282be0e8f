// Package compose holds the multi-host compose deployment; this test checks
// that the compose file, the Prometheus scrape config and the Grafana
// provisioning agree on names, ports, paths and secrets.
package compose

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type service struct {
	Image string `yaml:"image"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Secrets     []string          `yaml:"secrets"`
	Hostname    string            `yaml:"hostname"`
	Networks    map[string]struct {
		Aliases []string `yaml:"aliases"`
	} `yaml:"networks"`
}

type composeFile struct {
	Services map[string]service `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

func load(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

func flag(args []string, name string) string {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// samePath reports whether two paths relative to this directory name the same
// existing file (the compose Dockerfile path is relative to its build context).
func samePath(t *testing.T, a, b string) bool {
	t.Helper()
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

func mounts(s service) map[string]string { // container path → host path
	out := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out[parts[1]] = parts[0]
		}
	}
	return out
}

func TestComposeRunsTwoServersTwoRunnersAndMonitoring(t *testing.T) {
	c := load(t)
	var names []string
	for n := range c.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"grafana", "postgres", "prometheus", "runner-a", "runner-b", "server-a", "server-b"}
	if !slices.Equal(names, want) {
		t.Fatalf("services = %v, want %v", names, want)
	}

	aliases := map[string]bool{}
	for _, n := range []string{"server-a", "server-b"} {
		s := c.Services[n]
		if !samePath(t, filepath.Join(s.Build.Context, s.Build.Dockerfile), "../docker/server.Dockerfile") {
			t.Errorf("%s does not build from deploy/docker/server.Dockerfile", n)
		}
		if s.Build.Context != "../../bin" {
			t.Errorf("%s build context %s, want ../../bin (static binaries from make build)", n, s.Build.Context)
		}
		if len(s.Command) == 0 || s.Command[0] != "serve" || !slices.Contains(s.Command, "--auto-migrate") {
			t.Errorf("%s command = %v, want serve --auto-migrate ...", n, s.Command)
		}
		if flag(s.Command, "--listen") != "0.0.0.0:7443" || flag(s.Command, "--metrics-listen") != "0.0.0.0:9464" {
			t.Errorf("%s listens on %v", n, s.Command)
		}
		tokenFile := flag(s.Command, "--operator-token-file")
		if tokenFile != "/run/secrets/operator-token" || !slices.Contains(s.Secrets, "operator-token") {
			t.Errorf("%s operator token %q is not the operator-token secret", n, tokenFile)
		}
		if !strings.Contains(s.Environment["CLAWGUARD_DATABASE_URL"], "@postgres:5432/") {
			t.Errorf("%s CLAWGUARD_DATABASE_URL does not point at the postgres service", n)
		}
		for _, a := range s.Networks["default"].Aliases {
			aliases[a] = true
		}
	}

	ids := map[string]bool{}
	for _, n := range []string{"runner-a", "runner-b"} {
		s := c.Services[n]
		if !samePath(t, filepath.Join(s.Build.Context, s.Build.Dockerfile), "../docker/runner.Dockerfile") {
			t.Errorf("%s does not build from deploy/docker/runner.Dockerfile", n)
		}
		id := flag(s.Command, "--id")
		if id != n || ids[id] {
			t.Errorf("%s runner id %q: want its own service name", n, id)
		}
		ids[id] = true
		if flag(s.Command, "--runtime") != "docker" {
			t.Errorf("%s --runtime = %q, want docker", n, flag(s.Command, "--runtime"))
		}
		host, _, _ := strings.Cut(flag(s.Command, "--server"), ":")
		if !aliases[host] {
			t.Errorf("%s dials %q, which is not an alias both server replicas carry (failover)", n, host)
		}
		secret := strings.TrimPrefix(flag(s.Command, "--token-file"), "/run/secrets/")
		if !slices.Contains(s.Secrets, secret) || c.Secrets[secret].File == "" {
			t.Errorf("%s token file is not a declared secret", n)
		}
		m := mounts(s)
		if m["/var/run/docker.sock"] != "/var/run/docker.sock" {
			t.Errorf("%s does not mount the Docker socket", n)
		}
		if dd := flag(s.Command, "--data-dir"); dd == "" || m[dd] != dd {
			t.Errorf("%s --data-dir %q is not bind-mounted at the same host path", n, dd)
		}
	}
	if len(aliases) != 1 {
		t.Errorf("server replicas carry aliases %v, want one shared alias", aliases)
	}

	for name, s := range c.Secrets {
		if !strings.HasPrefix(s.File, "./secrets/") {
			t.Errorf("secret %s reads %s, want a file under ./secrets/ (git-ignored)", name, s.File)
		}
	}
	gi, err := os.ReadFile("secrets/.gitignore")
	if err != nil || !strings.Contains(string(gi), "*") {
		t.Error("secrets/.gitignore does not keep token files out of git")
	}
}

// TestMonitoringConfigMatchesTheServices: Prometheus scrapes exactly the
// compose services on their metrics ports, and Grafana finds Prometheus and
// the dashboards where compose mounts them.
func TestMonitoringConfigMatchesTheServices(t *testing.T) {
	c := load(t)
	data, err := os.ReadFile("../prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatal(err)
	}
	targets := map[string][]string{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets[sc.JobName] = append(targets[sc.JobName], st.Targets...)
		}
	}
	expect := map[string][]string{"clawguard-server": nil, "clawguard-runner": nil}
	for name, s := range c.Services {
		ml := flag(s.Command, "--metrics-listen")
		if ml == "" {
			continue
		}
		_, port, _ := strings.Cut(ml, ":")
		job := "clawguard-server"
		if strings.HasPrefix(name, "runner-") {
			job = "clawguard-runner"
		}
		expect[job] = append(expect[job], name+":"+port)
	}
	for job, want := range expect {
		got := slices.Sorted(slices.Values(targets[job]))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("job %s scrapes %v, want %v", job, got, want)
		}
	}
	for _, rf := range prom.RuleFiles {
		if _, err := os.Stat(filepath.Join("../prometheus", rf)); err != nil {
			t.Errorf("rule file %s: %v", rf, err)
		}
	}
	if m := mounts(c.Services["prometheus"]); m["/etc/prometheus"] != "../prometheus" {
		t.Errorf("prometheus does not mount ../prometheus at /etc/prometheus: %v", m)
	}

	ds, err := os.ReadFile("../grafana/provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ds, []byte("url: http://prometheus:9090")) {
		t.Error("Grafana data source does not point at the prometheus service")
	}
	prov, err := os.ReadFile("../grafana/provisioning/dashboards/clawguard.yml")
	if err != nil {
		t.Fatal(err)
	}
	gm := mounts(c.Services["grafana"])
	if !bytes.Contains(prov, []byte("path: /var/lib/grafana/dashboards")) || gm["/var/lib/grafana/dashboards"] != "../grafana/dashboards" {
		t.Error("Grafana's dashboard provider path is not where compose mounts the dashboards")
	}
	if gm["/etc/grafana/provisioning"] != "../grafana/provisioning" {
		t.Error("Grafana provisioning is not mounted")
	}
}

// TestComposeConfigValidates asks Compose itself, when installed, to validate
// the file (in a copy of the tree with an empty bin/, the build context).
func TestComposeConfigValidates(t *testing.T) {
	var cmd []string
	if p, err := exec.LookPath("docker-compose"); err == nil {
		cmd = []string{p}
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		cmd = []string{"docker", "compose"}
	} else if os.Getenv("CI") == "true" {
		t.Fatal("neither docker-compose nor docker compose is installed (CI needs it to validate the compose file)")
	} else {
		t.Skip("neither docker-compose nor docker compose is installed; the structural tests above still ran")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"compose", "prometheus", "grafana", "docker"} {
		if err := os.CopyFS(filepath.Join(root, "deploy", dir), os.DirFS(filepath.Join("..", dir))); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(cmd[0], append(cmd[1:], "-f", filepath.Join(root, "deploy/compose/docker-compose.yml"), "config", "-q")...).CombinedOutput()
	if err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
}
