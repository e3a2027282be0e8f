package metricnames

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const runbookBase = "https://github.com/clawguard/clawguard/blob/main/deploy/RUNBOOKS.md#"

// TestEveryAlertLinksItsRunbook: each alert carries a runbook_url to its own
// section of deploy/RUNBOOKS.md, and each section there is an alert's — an
// on-call engineer paged at night lands on what to do.
func TestEveryAlertLinksItsRunbook(t *testing.T) {
	raw, err := os.ReadFile(repoRoot + "/deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(repoRoot + "/deploy/RUNBOOKS.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\w+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	alerts := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			anchor := strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != runbookBase+anchor {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, runbookBase+anchor)
			}
			if !sections[anchor] {
				t.Errorf("%s: deploy/RUNBOOKS.md has no section \"## %s\"", r.Alert, r.Alert)
			}
			delete(sections, anchor)
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts read from alerts.yml")
	}
	for s := range sections {
		t.Errorf("deploy/RUNBOOKS.md section %q names no alert", s)
	}
}
