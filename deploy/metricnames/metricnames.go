// Package metricnames finds the metric names that Prometheus rule files and
// Grafana dashboards depend on, so tests can check each one is really exported
// (a renamed metric otherwise turns a panel or an alert silently empty).
//
// Scan walks a directory: every YAML document with rule groups (a Prometheus
// rule file, or a PrometheusRule's spec) contributes its expressions and
// recording-rule names; every JSON file contributes each "expr" string and
// each label_values(...) / query_result(...) template query. Expressions are
// parsed with Prometheus's own PromQL parser, so a dashboard expression that
// does not parse is an error, not a silent skip.
//
// A live check reads as:
//
//	refs, _ := metricnames.Referenced("deploy")        // or Scan for recording rules too
//	exported, _ := metricnames.ParseExposition(scrape) // server and runner /metrics bodies, merged
//	missing := metricnames.Missing(refs, exported)
package metricnames

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Refs is what the files under one directory name.
type Refs struct {
	// Metrics are the metric names expressions select, sorted and unique;
	// recording rules (names with a colon) are not among them.
	Metrics []string
	// RecordingUsed are recording-rule names that expressions select.
	RecordingUsed []string
	// RecordingDefined are the names that `record:` rules define.
	RecordingDefined []string
	// Exprs counts the expressions parsed, so a caller can tell "nothing
	// referenced" from "nothing found".
	Exprs int
}

// Referenced returns the metric names the rule files and dashboards under dir
// select (recording rules excluded), sorted and unique.
func Referenced(dir string) ([]string, error) {
	r, err := Scan(dir)
	if err != nil {
		return nil, err
	}
	return r.Metrics, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Scan reads every rule file and dashboard under dir.
func Scan(dir string) (Refs, error) {
	s := scanner{
		metrics: map[string]bool{}, used: map[string]bool{}, defined: map[string]bool{},
		parser: parser.NewParser(parser.Options{}),
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "templates" && fileExists(filepath.Join(filepath.Dir(path), "Chart.yaml")) {
			return fs.SkipDir // a Helm chart's templates are not YAML until rendered (deploy/helm's test renders them)
		}
		if err == nil && d.IsDir() && d.Name() == "targets" && fileExists(filepath.Join(filepath.Dir(path), "hosts.yml")) {
			return fs.SkipDir // Prometheus's file_sd target lists (hosts.yml's): hosts, no expressions
		}
		if err != nil || d.IsDir() {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yml", ".yaml":
			return s.yamlFile(path)
		case ".json":
			return s.jsonFile(path)
		}
		return nil
	})
	if err != nil {
		return Refs{}, err
	}
	return Refs{
		Metrics:          sortedKeys(s.metrics),
		RecordingUsed:    sortedKeys(s.used),
		RecordingDefined: sortedKeys(s.defined),
		Exprs:            s.exprs,
	}, nil
}

// Exported maps each exported metric family name to its type as Prometheus
// writes it in "# TYPE" lines: counter, gauge, histogram, summary, untyped.
type Exported map[string]string

// synthetic are series Prometheus makes itself; no program exports them.
var synthetic = map[string]bool{
	"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true,
	"scrape_samples_post_metric_relabeling": true, "scrape_series_added": true,
	"ALERTS": true, "ALERTS_FOR_STATE": true,
}

// Missing returns the referenced names that no exported family provides.
// A histogram family provides name_bucket, name_sum and name_count; a summary
// provides name_sum and name_count.
func Missing(referenced []string, exported Exported) []string {
	var missing []string
	for _, name := range referenced {
		if synthetic[name] || exported[name] != "" || providedBySeries(name, exported) {
			continue
		}
		missing = append(missing, name)
	}
	return missing
}

func providedBySeries(name string, exported Exported) bool {
	for suffix, types := range map[string][]string{
		"_bucket": {"histogram"},
		"_sum":    {"histogram", "summary"},
		"_count":  {"histogram", "summary"},
	} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(types, exported[base]) {
			return true
		}
	}
	return false
}

type scanner struct {
	metrics, used, defined map[string]bool
	exprs                  int
	parser                 parser.Parser
}

// ruleGroups is the part of a rule file (or a PrometheusRule's spec) we read.
type ruleGroups struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func (s *scanner) yamlFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			ruleGroups `yaml:",inline"`
			Spec       ruleGroups `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		for _, rg := range []ruleGroups{doc.ruleGroups, doc.Spec} {
			for _, g := range rg.Groups {
				for _, r := range g.Rules {
					if r.Record != "" {
						s.defined[r.Record] = true
					}
					if r.Expr == "" {
						continue
					}
					where := fmt.Sprintf("%s: group %s: rule %s%s", path, g.Name, r.Record, r.Alert)
					if err := s.expr(r.Expr, where); err != nil {
						return err
					}
				}
			}
		}
	}
}

func (s *scanner) jsonFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return s.jsonValue(doc, path)
}

// jsonValue walks a dashboard: "expr" strings are panel queries; strings
// starting label_values( or query_result( are template variable queries.
func (s *scanner) jsonValue(v any, path string) error {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if str, ok := child.(string); ok && k == "expr" && strings.TrimSpace(str) != "" {
				if err := s.expr(str, path); err != nil {
					return err
				}
				continue
			}
			if err := s.jsonValue(child, path); err != nil {
				return err
			}
		}
	case []any:
		for _, child := range v {
			if err := s.jsonValue(child, path); err != nil {
				return err
			}
		}
	case string:
		if inner, ok := templateQuery(v); ok {
			return s.expr(inner, path)
		}
	}
	return nil
}

var (
	labelValuesRe = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)
	queryResultRe = regexp.MustCompile(`^\s*query_result\((.+)\)\s*$`)
	// Grafana's interval variables stand where a PromQL duration goes.
	grafanaIntervalRe = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)(_ms|_s)?\}?`)
)

// templateQuery returns the PromQL inside a Grafana template variable query.
// label_values(label) (no metric) selects nothing and is skipped.
func templateQuery(q string) (string, bool) {
	if m := labelValuesRe.FindStringSubmatch(q); m != nil {
		return m[1], true
	}
	if m := queryResultRe.FindStringSubmatch(q); m != nil {
		return m[1], true
	}
	return "", false
}

func (s *scanner) expr(text, where string) error {
	text = grafanaIntervalRe.ReplaceAllString(text, "5m")
	e, err := s.parser.ParseExpr(text)
	if err != nil {
		return fmt.Errorf("%s: expression %q: %w", where, text, err)
	}
	s.exprs++
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, name := range selectedNames(vs) {
			if strings.Contains(name, ":") {
				s.used[name] = true
			} else {
				s.metrics[name] = true
			}
		}
		return nil
	})
	return nil
}

// selectedNames is the metric name a selector picks, written either as
// name{...} or as {__name__="name"}.
func selectedNames(vs *parser.VectorSelector) []string {
	if vs.Name != "" {
		return []string{vs.Name}
	}
	var names []string
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			names = append(names, m.Value)
		}
	}
	return names
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
