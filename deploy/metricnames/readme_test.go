package metricnames

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheMetricTablesListEveryExportedMetric keeps deploy/README.md's
// metric tables in step with the code (issue 45: 13 exported metrics, some
// that alerts select, were in no table): every clawguard_* metric the
// server or the runner exports has a row, and every row names one they
// export.
func TestTheMetricTablesListEveryExportedMetric(t *testing.T) {
	exported := Exported{}
	exportedBy(t, "github.com/clawguard/clawguard/server/internal/metrics/listnames", exported)
	exportedBy(t, "github.com/clawguard/clawguard/runner/internal/metrics/listnames", exported)
	readme, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(clawguard_[a-z0-9_]+)`").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = true
	}
	if len(rows) < 40 {
		t.Fatalf("found %d metric rows in deploy/README.md; are the tables where this test looks?", len(rows))
	}
	for name := range exported {
		if strings.HasPrefix(name, "clawguard_") && !rows[name] {
			t.Errorf("%s is exported but deploy/README.md's metric tables have no row for it", name)
		}
	}
	for name := range rows {
		if _, ok := exported[name]; !ok {
			t.Errorf("deploy/README.md has a row for %s, which neither the server nor the runner exports", name)
		}
	}
}
