package metricnames

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/config"
	_ "github.com/prometheus/prometheus/discovery/file" // file_sd_configs (hosts.yml)
	"go.yaml.in/yaml/v3"
)

// TestSelectedJobsAreSetByEveryScrapeConfig: every job="..." that an alert,
// rule or the dashboard selects is a job name of every shipped scrape
// config (compose's prometheus.yml, make run's local.yml, the hosts' hosts.yml) and of the k8s
// ServiceMonitors (their job label is the Service name) — else an alert
// such as ClawguardControlPlaneDown watches a series nobody scrapes.
func TestSelectedJobsAreSetByEveryScrapeConfig(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	selected := map[string]bool{}
	jobSel := regexp.MustCompile(`job\s*=\s*\\?"([a-z0-9-]+)\\?"`)
	for _, p := range []string{"deploy/prometheus/alerts.yml", "deploy/prometheus/rules.yml", "deploy/grafana/dashboards/clawguard.json"} {
		for _, m := range jobSel.FindAllStringSubmatch(read(p), -1) {
			selected[m[1]] = true
		}
	}
	if !selected["clawguard-server"] {
		t.Fatalf("expected the alerts to select job=\"clawguard-server\"; selected %v", selected)
	}
	jobName := regexp.MustCompile(`job_name:\s*([a-z0-9-]+)`)
	for _, p := range []string{"deploy/prometheus/prometheus.yml", "deploy/prometheus/local.yml", "deploy/prometheus/hosts.yml"} {
		var jobs []string
		for _, m := range jobName.FindAllStringSubmatch(read(p), -1) {
			jobs = append(jobs, m[1])
		}
		for j := range selected {
			if !slices.Contains(jobs, j) {
				t.Errorf("%s: no scrape config sets job=%q, which the alerts or dashboard select", p, j)
			}
		}
	}
	monitors := regexp.MustCompile(`kind: ServiceMonitor\s+metadata:\s+name: ([a-z0-9-]+)`)
	var services []string
	for _, m := range monitors.FindAllStringSubmatch(read("deploy/k8s/base/servicemonitors.yaml"), -1) {
		services = append(services, m[1])
	}
	for j := range selected {
		if !slices.Contains(services, j) {
			t.Errorf("k8s: no ServiceMonitor for job %q", j)
		}
	}
}

// TestTheScrapeConfigsLoad: Prometheus's own loader accepts every shipped
// scrape config, and hosts.yml's target files list host:port targets on
// the documented ports (issue 45: N hosts, not the rehearsal's names).
func TestTheScrapeConfigsLoad(t *testing.T) {
	for _, p := range []string{"deploy/prometheus/prometheus.yml", "deploy/prometheus/local.yml", "deploy/prometheus/hosts.yml"} {
		if _, err := config.LoadFile(filepath.Join(repoRoot, p), false, promslog.NewNopLogger()); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for file, port := range map[string]string{"servers.yml": ":9464", "runners.yml": ":9465"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, "deploy/prometheus/targets", file))
		if err != nil {
			t.Fatal(err)
		}
		var groups []struct {
			Targets []string `yaml:"targets"`
		}
		if err := yaml.Unmarshal(data, &groups); err != nil || len(groups) == 0 || len(groups[0].Targets) == 0 {
			t.Fatalf("targets/%s: %v, %v", file, err, groups)
		}
		for _, tg := range groups[0].Targets {
			if !strings.HasSuffix(tg, port) {
				t.Errorf("targets/%s: %s is not on %s", file, tg, port)
			}
		}
	}
}
