package metricnames

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScanReadsRulesAlertsAndDashboards(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "rules.yml", `
groups:
  - name: g
    rules:
      - record: app:req_errors:ratio_rate5m
        expr: sum by (grpc_code) (rate(grpc_server_handled_total{grpc_code!="OK"}[5m])) / sum(rate(grpc_server_handled_total[5m]))
      - record: app:latency:p99
        expr: histogram_quantile(0.99, sum by (le) (rate(app_latency_seconds_bucket[5m])))
`)
	write(t, dir, "alerts.yml", `
groups:
  - name: a
    rules:
      - alert: High
        expr: app:req_errors:ratio_rate5m > 0.1 and on() up{job="app"} == 1
`)
	// A PrometheusRule object and a non-rule YAML document in one file.
	write(t, dir, "k8s/rule.yaml", `
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
spec:
  groups:
    - name: k
      rules:
        - alert: Panics
          expr: increase({__name__="app_panics_total"}[10m]) > 0
---
kind: ConfigMap
data: {a: b}
`)
	write(t, dir, "dash/d.json", `{
  "panels": [{"targets": [{"expr": "sum(rate(app_decisions_total{action=~\"$action\"}[$__rate_interval])) / app:missing_rule"}]}],
  "templating": {"list": [
    {"query": {"query": "label_values(app_actions_info, action)"}},
    {"definition": "label_values(instance)"}
  ]}
}`)
	// promtool test files name no groups and are ignored.
	write(t, dir, "tests/t.yml", "rule_files: [../rules.yml]\ntests: []\n")

	refs, err := Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics := []string{"app_actions_info", "app_decisions_total", "app_latency_seconds_bucket", "app_panics_total", "grpc_server_handled_total", "up"}
	if !slices.Equal(refs.Metrics, wantMetrics) {
		t.Errorf("Metrics = %v, want %v", refs.Metrics, wantMetrics)
	}
	if want := []string{"app:missing_rule", "app:req_errors:ratio_rate5m"}; !slices.Equal(refs.RecordingUsed, want) {
		t.Errorf("RecordingUsed = %v, want %v", refs.RecordingUsed, want)
	}
	if want := []string{"app:latency:p99", "app:req_errors:ratio_rate5m"}; !slices.Equal(refs.RecordingDefined, want) {
		t.Errorf("RecordingDefined = %v, want %v", refs.RecordingDefined, want)
	}
	if refs.Exprs != 6 {
		t.Errorf("Exprs = %d, want 6", refs.Exprs)
	}
}

func TestScanFailsOnAnExpressionThatDoesNotParse(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "d.json", `{"panels": [{"targets": [{"expr": "sum(rate(app_total[5m])"}]}]}`)
	_, err := Scan(dir)
	if err == nil || !strings.Contains(err.Error(), "d.json") {
		t.Fatalf("Scan = %v, want a parse error naming d.json", err)
	}
}

func TestMissingAcceptsHistogramSeriesAndSyntheticNames(t *testing.T) {
	exported := Exported{
		"app_latency_seconds": "histogram",
		"app_rpc_seconds":     "summary",
		"app_decisions_total": "counter",
	}
	got := Missing([]string{
		"app_latency_seconds_bucket", "app_latency_seconds_count", "app_rpc_seconds_sum",
		"app_decisions_total", "up", "ALERTS",
		"app_rpc_seconds_bucket",    // a summary has no buckets
		"app_decisions_total_count", // a counter has no _count series
		"app_renamed_total",
	}, exported)
	want := []string{"app_rpc_seconds_bucket", "app_decisions_total_count", "app_renamed_total"}
	if !slices.Equal(got, want) {
		t.Errorf("Missing = %v, want %v", got, want)
	}
}

func TestParseExpositionReadsTypesAndUntypedSamples(t *testing.T) {
	body := `# HELP app_latency_seconds Latency.
# TYPE app_latency_seconds histogram
app_latency_seconds_bucket{le="0.1"} 1
app_latency_seconds_bucket{le="+Inf"} 2
app_latency_seconds_sum 0.3
app_latency_seconds_count 2
# TYPE app_decisions_total counter
app_decisions_total{action="a",effect="allow"} 0
legacy_thing 4
`
	got, err := ParseExposition(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want := Exported{"app_latency_seconds": "histogram", "app_decisions_total": "counter", "legacy_thing": "untyped"}
	if len(got) != len(want) {
		t.Fatalf("ParseExposition = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: type %q, want %q", k, got[k], v)
		}
	}
	if _, err := ParseExposition(strings.NewReader("# TYPE broken\n")); err == nil {
		t.Error("a malformed TYPE line was accepted")
	}
}
