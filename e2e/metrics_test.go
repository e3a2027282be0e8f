package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/deploy/metricnames"
	"github.com/clawguard/clawguard/migrations/pgtest"
)

// TestLiveScrapeExportsDeployMetrics scrapes a live clawguard-server and a
// live clawguard-runner (process runtime, one demo-agent session, no agent
// action yet) over HTTP and fails if any metric that a recording rule, alert
// or Grafana panel under deploy/ names is exported by neither. Scraping
// before any decision also checks that label combinations are
// pre-initialised: a rate must show from the first scrape.
func TestLiveScrapeExportsDeployMetrics(t *testing.T) {
	refs, err := metricnames.Scan(filepath.Join(repoRoot, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	if refs.Exprs < 40 || len(refs.Metrics) < 10 {
		t.Fatalf("deploy/ gave %d expressions naming %d metrics; are the rules and dashboards where the scan looks?", refs.Exprs, len(refs.Metrics))
	}

	dir := t.TempDir()
	srv := startServer(t, "server", pgtest.NewEmptyDB(t), loopback(t), loopback(t), filepath.Join(dir, "operator.token"))
	n := nclFor(t, srv)
	group := n.must(t, "groups", "create", "--name", "scraped", "--cli-scope", "group", "-q")
	runnerMetrics := loopback(t)
	startRunner(t, runnerOpts{
		id: "scrape-1", host: "scrape-host", server: srv.addr, tokenFile: runnerToken(t, n, "scrape-1"),
		dataDir: runnerDataDir(t), metrics: runnerMetrics, groups: []string{group}, script: "[]",
	})

	// The runner is up when both of its streams are connected and its
	// agent runs.
	var runnerBody string
	waitFor(t, 30*time.Second, "runner streams connected and its agent started", func() (bool, string) {
		body, err := scrape(runnerMetrics)
		if err != nil {
			return false, err.Error()
		}
		runnerBody = body
		up, _ := sample(body, "clawguard_runner_stream_connected")
		running, _ := sample(body, "clawguard_runner_containers_running")
		return up == "1" && running == "1", "stream_connected=" + up + " containers_running=" + running
	})
	serverBody, err := scrape(srv.metrics)
	if err != nil {
		t.Fatal(err)
	}

	// Issue 33: both Postgres pools are reported, the main one in use.
	for _, series := range []string{`clawguard_db_pool_max_connections{pool="main"}`, `clawguard_db_pool_max_connections{pool="decision_log"}`} {
		if v, ok := sample(serverBody, series); !ok || v == "0" {
			t.Errorf("%s = %q (%v), want the pool's size", series, v, ok)
		}
	}
	if v, ok := sample(serverBody, `clawguard_db_pool_acquires_total{pool="main"}`); !ok || v == "0" {
		t.Errorf(`clawguard_db_pool_acquires_total{pool="main"} = %q (%v), want the acquires the server made`, v, ok)
	}
	fromServer, fromRunner := exported(t, serverBody), exported(t, runnerBody)
	// Each endpoint must be the program it claims to be, so a swapped or
	// empty scrape cannot pass by accident.
	if !hasPrefix(fromServer, "clawguard_guard_") || hasPrefix(fromServer, "clawguard_runner_") {
		t.Errorf("server scrape does not look like clawguard-server's: %v", names(fromServer, "clawguard_"))
	}
	if !hasPrefix(fromRunner, "clawguard_runner_") || hasPrefix(fromRunner, "clawguard_guard_") {
		t.Errorf("runner scrape does not look like clawguard-runner's: %v", names(fromRunner, "clawguard_"))
	}

	union := metricnames.Exported{}
	for _, e := range []metricnames.Exported{fromServer, fromRunner} {
		for name, typ := range e {
			union[name] = typ
		}
	}
	var missing []string
	for _, name := range metricnames.Missing(refs.Metrics, union) {
		if _, ok := onFirstUse[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("deploy/ rules, alerts or dashboards name %d metric(s) that neither the live server nor the live runner exports: %v",
			len(missing), missing)
	}
	t.Logf("%d metrics named by deploy/ all exported (server %d families, runner %d)", len(refs.Metrics), len(fromServer), len(fromRunner))
}

func hasPrefix(e metricnames.Exported, prefix string) bool {
	return len(names(e, prefix)) > 0
}

func names(e metricnames.Exported, prefix string) []string {
	var out []string
	for name := range e {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// onFirstUse are the metrics deploy/ names whose every series is labeled by
// what only a call says (a model provider and model): a process exports
// them from its first model call, not before, so this live scrape (no model
// call) cannot see them. That their names are what the code registers is
// deploy/metricnames' static test.
var onFirstUse = map[string]string{
	"clawguard_model_calls_total":                      "provider, model",
	"clawguard_model_cost_micros_total":                "provider, model",
	"clawguard_model_tokens_total":                     "provider, model",
	"clawguard_runner_model_calls_total":               "provider",
	"clawguard_runner_model_first_byte_seconds_bucket": "provider",
	"clawguard_runner_model_gateway_seconds_bucket":    "provider",
}
