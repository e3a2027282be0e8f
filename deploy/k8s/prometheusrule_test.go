package k8s

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The PrometheusRule of the base is deploy/prometheus's rules and alerts,
// with nothing changed: one source. Regenerate it after changing them with
//
//	CLAWGUARD_UPDATE_PROMETHEUSRULE=1 go test ./deploy/k8s -run TestPrometheusRuleIsTheRulesFiles
const prometheusRule = "base/prometheusrule.yaml"

func rulesGroups(t *testing.T) []any {
	t.Helper()
	var groups []any
	for _, f := range []string{"rules.yml", "alerts.yml"} {
		raw, err := os.ReadFile(filepath.Join("..", "prometheus", f))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Groups []any `yaml:"groups"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		groups = append(groups, doc.Groups...)
	}
	return groups
}

func TestPrometheusRuleIsTheRulesFiles(t *testing.T) {
	want := rulesGroups(t)
	if len(want) < 2 {
		t.Fatalf("deploy/prometheus has %d rule groups; are the files where this test looks?", len(want))
	}
	if os.Getenv("CLAWGUARD_UPDATE_PROMETHEUSRULE") != "" {
		doc := map[string]any{
			"apiVersion": "monitoring.coreos.com/v1",
			"kind":       "PrometheusRule",
			"metadata": map[string]any{"name": "clawguard", "labels": map[string]any{
				"app.kubernetes.io/name": "clawguard", "app.kubernetes.io/component": "monitoring"}},
			"spec": map[string]any{"groups": want},
		}
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		header := "# Generated from deploy/prometheus/rules.yml and alerts.yml (one source): do not edit;\n" +
			"# CLAWGUARD_UPDATE_PROMETHEUSRULE=1 go test ./deploy/k8s -run TestPrometheusRuleIsTheRulesFiles\n"
		if err := os.WriteFile(prometheusRule, append([]byte(header), out...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(prometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Groups []any `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "PrometheusRule" || !reflect.DeepEqual(got.Spec.Groups, want) {
		t.Fatalf("%s is not deploy/prometheus's rules and alerts: regenerate it (see this test's comment)", prometheusRule)
	}
	// And the base deploys it.
	found := false
	for _, o := range render(t) {
		found = found || (o.Kind() == "PrometheusRule" && o.Name() == "clawguard")
	}
	if !found {
		t.Error("the base does not render the PrometheusRule")
	}
}
