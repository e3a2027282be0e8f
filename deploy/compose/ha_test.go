package compose

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The HA override is the shape the fault suite's failover test ran: the
// servers reach whichever node is the primary (a DSN naming both, read-write
// only), the standby streams as the name the primary waits for, and the
// primary makes that name synchronous.
func TestPostgresHAOverrideIsASynchronousStandby(t *testing.T) {
	data, err := os.ReadFile("postgres-ha.yml")
	if err != nil {
		t.Fatal(err)
	}
	var ha composeFile
	if err := yaml.Unmarshal(data, &ha); err != nil {
		t.Fatalf("postgres-ha.yml: %v", err)
	}
	base := load(t)
	for _, name := range []string{"server-a", "server-b"} {
		if _, ok := base.Services[name]; !ok {
			t.Fatalf("docker-compose.yml has no %s to override", name)
		}
		dsn := ha.Services[name].Environment["CLAWGUARD_DATABASE_URL"]
		if !strings.Contains(dsn, "@postgres:5432,postgres-standby:5432/") || !strings.Contains(dsn, "target_session_attrs=read-write") {
			t.Errorf("%s's DSN %q: want both hosts and target_session_attrs=read-write", name, dsn)
		}
	}
	// Issue 45: an old primary that comes back by itself would be a second
	// primary; neither node is restarted by Docker.
	var restarts struct {
		Services map[string]struct {
			Restart string `yaml:"restart"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &restarts); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"postgres", "postgres-standby"} {
		if r := restarts.Services[n].Restart; r != "no" {
			t.Errorf("postgres-ha.yml: %s restart %q, want \"no\" (a node that was primary must not come back read-write)", n, r)
		}
	}
	init, err := os.ReadFile("postgres-ha/primary-init.sh")
	if err != nil {
		t.Fatal(err)
	}
	standby, err := os.ReadFile("postgres-ha/standby.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"synchronous_standby_names = 'standby1'", "REPLICATION", "GRANT pg_monitor TO clawguard", "host replication replicator"} {
		if !strings.Contains(string(init), want) {
			t.Errorf("primary-init.sh lacks %q", want)
		}
	}
	for _, want := range []string{"application_name=standby1", "pg_basebackup", " -R ", "synchronous_standby_names = ''"} {
		if !strings.Contains(string(standby), want) {
			t.Errorf("standby.sh lacks %q", want)
		}
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	vols, _ := m["services"].(map[string]any)["postgres"].(map[string]any)["volumes"].([]any)
	found := false
	for _, v := range vols {
		found = found || strings.HasPrefix(v.(string), "./postgres-ha/primary-init.sh:/docker-entrypoint-initdb.d/")
	}
	if !found {
		t.Errorf("the primary does not run postgres-ha/primary-init.sh at its first start: %v", vols)
	}
}

// TestPostgresHAOverrideValidates asks Compose to validate the two files
// together, as TestComposeConfigValidates does the first.
func TestPostgresHAOverrideValidates(t *testing.T) {
	var cmd []string
	if p, err := exec.LookPath("docker-compose"); err == nil {
		cmd = []string{p}
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		cmd = []string{"docker", "compose"}
	} else {
		t.Fatal("neither docker-compose nor docker compose is installed: it validates the compose files (apt-get install docker-compose)")
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
	dir := filepath.Join(root, "deploy/compose")
	out, err := exec.Command(cmd[0], append(cmd[1:], "-f", filepath.Join(dir, "docker-compose.yml"), "-f", filepath.Join(dir, "postgres-ha.yml"), "config", "-q")...).CombinedOutput()
	if err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
}
