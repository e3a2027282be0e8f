package metricnames

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestSelectedJobsAreSetByEveryScrapeConfig: every job="..." that an alert,
// rule or the dashboard selects is a job name of every shipped scrape
// config (compose's prometheus.yml, make run's local.yml) and of the k8s
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
	for _, p := range []string{"deploy/prometheus/prometheus.yml", "deploy/prometheus/local.yml"} {
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
