package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Runs appended to a report come back as one table, a row each, with the
// closed loop's load, the warm-up's errors and the re-asks spelled out.
func TestReportRoundTripsToATable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	open := &result{mode: "unary", rate: 2000, achieved: 1999.5, errors: 3, warmErrors: 2, errCodes: "ResourceExhausted=3",
		refusals: 40, calls: 30000, lat: []time.Duration{time.Millisecond, 2 * time.Millisecond},
		cost:     cost{decisions: 26000, serverCPU: 300, pgCPU: 200, generatorCPU: 150, walBytes: 740},
		admitted: &admittedSummary{N: 20000, P50: 1500 * time.Microsecond, P99: 12 * time.Millisecond, Within25: 0.995}}
	closed := &result{mode: "closed 512", achieved: 13000, lat: []time.Duration{30 * time.Millisecond}}
	for _, row := range []reportRow{
		newReportRow(config{label: "open2000", mode: "unary"}, open, &approvalResult{rate: 100, achieved: 99.9, afterClick: []time.Duration{5 * time.Millisecond}}),
		newReportRow(config{label: "closed-max", mode: "unary", closed: 512}, closed, nil),
	} {
		if err := appendReport(path, row); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := summarize(path, &out); err != nil {
		t.Fatal(err)
	}
	table, _, _ := strings.Cut(out.String(), "\n\nGoals") // open2000's bounds follow the table
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header, a rule and two rows, got:\n%s", out.String())
	}
	for _, want := range []string{"| open2000 | unary open 2000/s | 2000 |", "| 1.50 / 12.00 (99.5 %) |", "(2 in the warm-up); 40 refusals asked again",
		"300 + 200 (server per call sent: 260) | 150 | 740 |", "99.9 of 100 (0 errors), 5.00"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("row %q lacks %q", lines[2], want)
		}
	}
	if !strings.Contains(lines[3], "| closed-max | unary closed 512 | 13000 |") {
		t.Errorf("closed-loop row: %q", lines[3])
	}
}

// Re-asks wait the hint, doubled per refusal in a row, jittered by ±25 %,
// and capped at max(2 s, hint), as the runner's decide client does.
func TestReaskWaitsDoubleWithJitterUpToTheCap(t *testing.T) {
	var w reaskWaits
	hint := 40 * time.Millisecond
	for i, base := range []time.Duration{40, 80, 160, 320, 640, 1280, 2000, 2000} {
		base *= time.Millisecond
		got := w.next(hint)
		if got < base*3/4 || got > base*5/4 {
			t.Fatalf("wait %d: %v, want %v ± 25 %%", i, got, base)
		}
	}
	long := reaskWaits{refusals: 3}
	if got := long.next(5 * time.Second); got < 3750*time.Millisecond || got > 6250*time.Millisecond {
		t.Fatalf("a hint above 2 s is waited in full (jittered): %v", got)
	}
}

// The side-by-side goals are ratios of two runs of one report: printed when
// both runs are there, each said met or not against its target.
func TestGoalsAreRatiosOfRunsInTheReport(t *testing.T) {
	runs := map[string]reportRow{
		"floor2000":     {Label: "floor2000", P50: 0.4, P99: 2},
		"open2000":      {Label: "open2000", P50: 0.7, P99: 4, PGCPU: 120, WAL: 480},
		"fga-open2000":  {Label: "fga-open2000", P50: 1.5, P99: 20},
		"closed":        {Label: "closed", Achieved: 9000},
		"fga-closed":    {Label: "fga-closed", Achieved: 4000},
		"approvals":     {Label: "approvals", Approvals: &approvalReport{P99: 12.5}},
		"approvals20":   {Label: "approvals20", Approvals: &approvalReport{P99: 6.5}},
		"durable2000":   {Label: "durable2000", P50: 0.6, P99: 3},
		"open150-reask": {Label: "open150-reask", Achieved: 9500, AdmittedP99: 10},
	}
	var out bytes.Buffer
	printGoals(&out, runs)
	for _, want := range []string{
		"p50 at 2,000/s against OpenFGA's (open2000 / fga-open2000): 0.47×, goal ≤ 0.5×: met",
		"p99 at 2,000/s against OpenFGA's (open2000 / fga-open2000): 0.20×, goal ≤ 0.5×: met",
		"against the machine's floor (open2000 / floor2000): 1.75×, goal ≤ 2×: met",
		"(closed / fga-closed): 2.25×, goal ≥ 3×: NOT met",
		"admitted p99 at 150 % against the p99 at 2,000/s (open150-reask / open2000): 2.50×, goal ≤ 4×: met",
		"100 approvals/s beside 2,000 decisions/s (issue 48: no worse than before) (approvals): 12.50 ms, goal ≤ 10 ms: NOT met",
		"20 approvals/s beside 500 decisions/s (approvals20): 6.50 ms, goal ≤ 10 ms: met",
		"p50 at 2,000/s against the durable floor (open2000 / durable2000): 1.17×, goal ≤ 1.2×: met",
		"p99 at 2,000/s against OpenFGA's (open2000 / fga-open2000): 0.20×, goal ≤ 1×: met",
		"Postgres CPU per decision at 2,000/s (open2000): 120.00 µs, goal ≤ 100 µs: NOT met",
		"WAL per decision at 2,000/s (open2000): 480.00 B, goal ≤ 500 B: met",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("goals lack %q:\n%s", want, out.String())
		}
	}
	// Capacity (closed-max) was not measured: that goal is not guessed.
	if strings.Contains(out.String(), "goodput") {
		t.Errorf("a goal without its runs was printed:\n%s", out.String())
	}
	out.Reset()
	printGoals(&out, map[string]reportRow{"closed": runs["closed"]})
	if out.Len() != 0 {
		t.Errorf("no pair of runs, yet: %q", out.String())
	}
}

// With the durable floor in the report, each everyday-load goal says whether
// its target is below what an answer waiting for a durable write costs.
func TestDurableFloorBoundsTheEverydayGoals(t *testing.T) {
	runs := map[string]reportRow{
		"floor2000":    {Label: "floor2000", P50: 0.3, P99: 2},
		"durable2000":  {Label: "durable2000", P50: 0.8, P99: 4},
		"open2000":     {Label: "open2000", P50: 1.2, P99: 10},
		"fga-open2000": {Label: "fga-open2000", P50: 1.0, P99: 20},
	}
	var out bytes.Buffer
	printGoals(&out, runs)
	for _, want := range []string{
		"against the durable floor (open2000 / durable2000): 1.50×",
		`the durable floor on the goal "issue 35, everyday load: p50 at 2,000/s against OpenFGA's" (durable2000 / fga-open2000): 0.80× for a goal of ≤ 0.5×: below the floor`,
		`the durable floor on the goal "issue 35, everyday load: p99 at 2,000/s against OpenFGA's" (durable2000 / fga-open2000): 0.20× for a goal of ≤ 0.5×: within reach`,
		`the durable floor on the goal "issue 35, everyday load: p50 at 2,000/s against the machine's floor" (durable2000 / floor2000): 2.67× for a goal of ≤ 2×: below the floor`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("goals lack %q:\n%s", want, out.String())
		}
	}
	delete(runs, "durable2000")
	out.Reset()
	printGoals(&out, runs)
	if strings.Contains(out.String(), "durable") {
		t.Errorf("no durable2000 run, yet the floor is named:\n%s", out.String())
	}
}
