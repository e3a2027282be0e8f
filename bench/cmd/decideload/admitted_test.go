package main

import (
	"strings"
	"testing"
	"time"
)

const exposition = `# HELP clawguard_guard_admitted_seconds Time ...
# TYPE clawguard_guard_admitted_seconds histogram
clawguard_guard_admitted_seconds_bucket{le="0.01"} 98
clawguard_guard_admitted_seconds_bucket{le="0.025"} 99
clawguard_guard_admitted_seconds_bucket{le="0.05"} 100
clawguard_guard_admitted_seconds_bucket{le="+Inf"} 100
clawguard_guard_admitted_seconds_sum 0.9
clawguard_guard_admitted_seconds_count 100
`

// The window's histogram is the later scrape less the earlier one, and its
// quantiles are interpolated within a bucket as histogram_quantile does.
func TestAdmittedWindowQuantiles(t *testing.T) {
	before := parseBuckets(strings.NewReader(`# TYPE clawguard_guard_admitted_seconds histogram
clawguard_guard_admitted_seconds_bucket{le="0.01"} 50
clawguard_guard_admitted_seconds_bucket{le="0.025"} 50
clawguard_guard_admitted_seconds_bucket{le="0.05"} 50
clawguard_guard_admitted_seconds_bucket{le="+Inf"} 50
clawguard_guard_admitted_seconds_sum 0.4
clawguard_guard_admitted_seconds_count 50
`), admittedMetric)
	after := parseBuckets(strings.NewReader(exposition), admittedMetric)
	if after == nil || len(after.le) != 4 {
		t.Fatalf("parsed %+v, want 4 buckets", after)
	}
	d := after.since(before)
	if d.total() != 50 {
		t.Fatalf("window total %v, want 50", d.total())
	}
	s := summarizeAdmitted(d)
	// 48 of 50 within 10 ms: the median is at rank 25 of the first bucket.
	if want := seconds(0.01 * 25 / 48); s.P50 != want {
		t.Errorf("p50 %v, want %v", s.P50, want)
	}
	// Rank 49.5 falls in (25 ms, 50 ms], which holds one observation.
	if want := 37500 * time.Microsecond; s.P99 != want {
		t.Errorf("p99 %v, want %v", s.P99, want)
	}
	if s.Within25 != 49.0/50 {
		t.Errorf("within 25 ms %v, want 0.98", s.Within25)
	}
}

func TestAdmittedWindowNeedsBothScrapes(t *testing.T) {
	after := parseBuckets(strings.NewReader(exposition), admittedMetric)
	if got := after.since(nil); got != nil {
		t.Errorf("no earlier scrape: %+v, want nil", got)
	}
	if parseBuckets(strings.NewReader("clawguard_guard_decision_seconds_bucket{le=\"0.01\"} 3\n"), admittedMetric) != nil {
		t.Error("an older server without the histogram must give nil")
	}
	if summarizeAdmitted(after.since(after)) != nil {
		t.Error("a window with nothing admitted has no summary")
	}
}
