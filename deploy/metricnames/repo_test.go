package metricnames

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the workspace root, where go.work lives.
const repoRoot = "../.."

// exportedBy runs one of the listnames commands (they live beside the metrics
// packages, which are internal to their modules) and reads the exposition it prints.
func exportedBy(t *testing.T, pkg string, into Exported) {
	t.Helper()
	cmd := exec.Command("go", "run", pkg)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run %s: %v\n%s", pkg, err, stderr.String())
	}
	got, err := ParseExposition(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("go run %s: %v", pkg, err)
	}
	n := 0
	for name, typ := range got {
		into[name] = typ
		n++
	}
	if n == 0 {
		t.Fatalf("go run %s printed no metric", pkg)
	}
}

// TestEveryReferencedMetricIsExported keeps deploy/ and the code in step: a
// rule, alert or dashboard panel that names a metric no program exports would
// be silently empty.
func TestEveryReferencedMetricIsExported(t *testing.T) {
	exported := Exported{}
	exportedBy(t, "github.com/clawguard/clawguard/server/internal/metrics/listnames", exported)
	exportedBy(t, "github.com/clawguard/clawguard/runner/internal/metrics/listnames", exported)

	// The whole of deploy/: rule files and dashboards wherever they are.
	all, err := Scan("..")
	if err != nil {
		t.Fatal(err)
	}
	if all.Exprs < 40 {
		t.Fatalf("parsed only %d expressions under deploy/; are the rule files and dashboard where this test looks?", all.Exprs)
	}
	for _, name := range all.Metrics {
		if !strings.HasPrefix(name, "clawguard_") && !strings.HasPrefix(name, "grpc_") && name != "up" {
			t.Errorf("deploy/ names %s: only clawguard_*, grpc_* and up are ours to rely on", name)
		}
	}
	if missing := Missing(all.Metrics, exported); len(missing) > 0 {
		t.Errorf("deploy/ names metrics that neither the server nor the runner exports: %v", missing)
	}
	for _, name := range all.RecordingUsed {
		if !slices.Contains(all.RecordingDefined, name) {
			t.Errorf("deploy/ selects recording rule %s, which no rules file defines", name)
		}
	}

	// And the other way round: every Clawguard metric is watched somewhere.
	for name, typ := range exported {
		if !strings.HasPrefix(name, "clawguard_") {
			continue
		}
		seen := slices.Contains(all.Metrics, name) ||
			(typ == "histogram" && slices.Contains(all.Metrics, name+"_bucket"))
		if !seen {
			t.Errorf("%s is exported but no rule, alert or dashboard panel uses it", name)
		}
	}
}
