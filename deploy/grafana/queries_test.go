package grafana

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// A dashboard as the query checks read it: every panel's targets, default
// unit and per-query unit overrides.
type unitPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr         string `json:"expr"`
		RefID        string `json:"refId"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options string `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
}

type unitDashboard struct {
	Panels     []unitPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// every dashboard shipped, by file.
func dashboards(t *testing.T) map[string]unitDashboard {
	t.Helper()
	files, err := filepath.Glob("dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	out := map[string]unitDashboard{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d unitDashboard
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = d
	}
	return out
}

var intervalVar = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)

func parse(t *testing.T, where, expr string) parser.Expr {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(intervalVar.ReplaceAllString(expr, "5m"))
	if err != nil {
		t.Fatalf("%s: %q: %v", where, expr, err)
	}
	return e
}

// filtered reports whether a selector narrows to the dashboard's $job and
// $namespace variables.
func filtered(vs *parser.VectorSelector) bool {
	has := func(name, value string) bool {
		return slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
			return m.Name == name && m.Type == labels.MatchRegexp && m.Value == value
		})
	}
	return has("job", "$job") && has("namespace", "$namespace")
}

// Issue 33: one Grafana serves several deployments (namespaces) and both
// the servers' and the runners' jobs; every query, the template variables'
// included, selects by $job and $namespace, so no panel mixes them.
func TestEveryQueryFiltersOnJobAndNamespace(t *testing.T) {
	for file, d := range dashboards(t) {
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
			if v.Name == "action" { // a variable's query narrows like a panel's
				inner := strings.TrimSuffix(strings.TrimPrefix(v.Definition, "label_values("), ", action)")
				parser.Inspect(parse(t, file+" variable action", inner), func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok && !filtered(vs) {
						t.Errorf("%s: variable action: %s does not filter on $job and $namespace", file, vs)
					}
					return nil
				})
			}
		}
		if !vars["job"] || !vars["namespace"] {
			t.Errorf("%s: template variables %v lack job or namespace", file, vars)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				parser.Inspect(parse(t, file+" "+p.Title, tg.Expr), func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok && !filtered(vs) {
						t.Errorf("%s: panel %q: %s does not filter on $job and $namespace", file, p.Title, vs)
					}
					return nil
				})
			}
		}
	}
}

// kind is what a query's result measures: "rate" (per second), "latency"
// (a histogram quantile of a _seconds histogram) or "" (anything else).
func kind(e parser.Expr) string {
	for {
		switch x := e.(type) {
		case *parser.ParenExpr:
			e = x.Expr
		case *parser.AggregateExpr:
			e = x.Expr
		case *parser.BinaryExpr:
			if _, lit := x.RHS.(*parser.NumberLiteral); !lit || !x.Op.IsComparisonOperator() {
				return "" // a ratio or a sum of unlike things: no rule
			}
			e = x.LHS // `… > 0` keeps what the left side measures
		case *parser.Call:
			switch x.Func.Name {
			case "rate", "irate":
				return "rate"
			case "histogram_quantile":
				if strings.Contains(x.Args[1].String(), "_seconds_bucket") {
					return "latency"
				}
			}
			return ""
		case *parser.VectorSelector:
			switch {
			case strings.Contains(x.Name, ":ratio_"):
				return "ratio"
			case strings.HasSuffix(x.Name, ":rate5m") || strings.HasSuffix(x.Name, ":rate1m"):
				return "rate"
			case strings.Contains(x.Name, "_seconds:p"):
				return "latency"
			}
			return ""
		default:
			return ""
		}
	}
}

// Issue 33: a rate drawn as a count reads as "42" with no "/s"; a latency
// drawn as a count reads as a number of nothing. Each query's unit — its
// panel's, or an override naming its refId or legend — says what it is.
func TestPanelUnitsSayWhatTheQueryMeasures(t *testing.T) {
	want := map[string][]string{
		"rate":    {"reqps", "ops", "rps", "wps", "cps", "Bps"}, // Bps: a rate of bytes
		"latency": {"s", "ms", "µs", "ns"},
		"ratio":   {"percentunit"},
	}
	checked := map[string]int{}
	for file, d := range dashboards(t) {
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				k := kind(parse(t, file+" "+p.Title, tg.Expr))
				if k == "" {
					continue
				}
				checked[k]++
				unit := p.FieldConfig.Defaults.Unit
				for _, o := range p.FieldConfig.Overrides {
					if (o.Matcher.ID == "byFrameRefID" && o.Matcher.Options == tg.RefID) ||
						(o.Matcher.ID == "byName" && o.Matcher.Options == tg.LegendFormat) {
						for _, pr := range o.Properties {
							if pr.ID == "unit" {
								unit, _ = pr.Value.(string)
							}
						}
					}
				}
				if !slices.Contains(want[k], unit) {
					t.Errorf("%s: panel %q query %s is a %s but drawn in %q (want one of %v)", file, p.Title, tg.RefID, k, unit, want[k])
				}
			}
		}
	}
	for _, k := range []string{"rate", "latency", "ratio"} {
		if checked[k] == 0 {
			t.Errorf("no %s query found: the check checks nothing", k)
		}
	}
}

// Issue 33: the recorded series the dashboard selects by $job and
// $namespace carry those labels: every aggregation of every recording rule
// keeps them (a rule that summed them away would show nothing once one job
// is picked).
func TestRecordingRulesKeepJobAndNamespace(t *testing.T) {
	data, err := os.ReadFile("../prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			n++
			parser.Inspect(parse(t, r.Record, r.Expr), func(node parser.Node, _ []parser.Node) error {
				if a, ok := node.(*parser.AggregateExpr); ok && (a.Without || !slices.Contains(a.Grouping, "job") || !slices.Contains(a.Grouping, "namespace")) {
					t.Errorf("recording rule %s: %s drops job or namespace", r.Record, a)
				}
				return nil
			})
		}
	}
	if n < 10 {
		t.Fatalf("read %d recording rules from rules.yml", n)
	}
}
