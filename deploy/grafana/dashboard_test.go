// Package grafana holds the provisioned Grafana dashboards; this test checks
// the dashboard's shape (the metric names it uses are checked in metricnames).
package grafana

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type panel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr       string `json:"expr"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string   `json:"unit"`
			Max  *float64 `json:"max"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("dashboards/clawguard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboards/clawguard.json: %v", err)
	}
	return d
}

// TestDashboardShowsWhatOperatorsWatch: the panels issue 8 asks for exist and
// each queries the metric it is about.
func TestDashboardShowsWhatOperatorsWatch(t *testing.T) {
	d := load(t)
	if d.UID != "clawguard" {
		t.Errorf("uid = %q, want a stable uid (links and alerts point at it)", d.UID)
	}
	want := map[string]string{ // panel title → a string its queries must contain
		"Hold rate per action":  "clawguard:guard_hold_rate_by_action:ratio_rate5m",
		"Deny rate per action":  "clawguard:guard_deny_rate_by_action:ratio_rate5m",
		"Decisions/s by action": "clawguard_guard_decisions_total",
		"Decisions/s":           "clawguard:guard_decisions:rate5m",
		"Decision p99":          "clawguard:guard_decision_seconds:p99_rate5m",
		"Pending holds by kind": "clawguard_approvals_holds_pending",
		"Oldest pending hold":   "clawguard_approvals_oldest_pending_hold_seconds",
		"Time to resolve (p50, p90) by kind, and p50 by the channel that answered": "sum by (le, channel) (rate(clawguard_approvals_time_to_resolve_seconds_bucket",
		"Runners live":                               "clawguard_registry_runners_live",
		"Runner stream state":                        "clawguard_runner_stream_connected",
		"Container spawns/s":                         "clawguard_runner_container_spawns_total",
		"Server replicas up":                         `job="clawguard-server"`,
		"Model tokens/s by provider, model and kind": "clawguard_model_tokens_total",
		"Model calls/s by outcome":                   "clawguard_runner_model_calls_total",
		"Model budget reservations/s":                "clawguard_model_reservations_total",
	}
	byTitle := map[string]panel{}
	for _, p := range d.Panels {
		if _, dup := byTitle[p.Title]; dup {
			t.Errorf("two panels titled %q", p.Title)
		}
		byTitle[p.Title] = p
	}
	for title, metric := range want {
		p, ok := byTitle[title]
		if !ok {
			t.Errorf("no panel %q", title)
			continue
		}
		found := false
		for _, tg := range p.Targets {
			found = found || strings.Contains(tg.Expr, metric)
		}
		if !found {
			t.Errorf("panel %q does not query %s", title, metric)
		}
	}
}

// TestPanelsFollowTheDataSourceVariable: a hard-coded uid would exist only on
// the Grafana the dashboard was drawn on.
func TestPanelsFollowTheDataSourceVariable(t *testing.T) {
	d := load(t)
	hasVar := false
	for _, v := range d.Templating.List {
		hasVar = hasVar || (v.Name == "datasource" && v.Type == "datasource")
	}
	if !hasVar {
		t.Fatal("no datasource template variable")
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource is not ${datasource}", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a target's datasource is not ${datasource}", p.Title)
			}
		}
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
		}
	}
}

// TestPercentPanelsShowRatios: a panel drawn in percent (clipped at 100 %)
// shows shares only; a rate per second or a count drawn that way is clipped
// at 1 and read as a share (three panels were, the admission panel among them).
func TestPercentPanelsShowRatios(t *testing.T) {
	for _, p := range load(t).Panels {
		if p.FieldConfig.Defaults.Unit != "percentunit" {
			continue
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, ":ratio_") {
				t.Errorf("panel %q is drawn in percent but queries %q, not a ratio", p.Title, tg.Expr)
			}
		}
	}
}
